// The typed client of the AstraBox API: every call the console makes goes
// through here and fails with an ApiError that carries the server's
// {code, message}. It authenticates with the API key header, or, signed in
// through the identity provider, with the browser's session cookie: then
// every write carries the CSRF header, and a sandbox's proxy (which takes
// no cookie) gets a short-lived endpoint token instead.
import type {
  Agent,
  AgentRequest,
  CreateSandboxRequest,
  Endpoint,
  FileInfo,
  ModelCheck,
  Page,
  Receipt,
  RuntimeProfile,
  Sandbox,
  SandboxList,
  SecretRequest,
  Session,
  Vault,
  VaultRequest,
} from "./types";
import type { UIMessage } from "ai";
import type { AgentAccess, APIKey, APIKeyRequest, AuditEntry, AuthSession, CurrentUser, NewAPIKey, User, UserRequest } from "./identity";

/** The header that carries the API key (api.HeaderAPIKey). */
export const API_KEY_HEADER = "OPEN-SANDBOX-API-KEY";

/** The header a write signed in by cookie carries (identityapi.CSRFHeader). */
export const CSRF_HEADER = "X-AstraBox-CSRF";

/** The header of an endpoint's token (api.HeaderProxyToken). */
export const PROXY_TOKEN_HEADER = "X-AstraBox-Proxy-Token";

/** The port execd listens on in every box (execd/wire.DefaultPort). */
export const EXECD_PORT = 44772;

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

/** A readable text for any error a call may throw. */
export function errorText(err: unknown): string {
  if (err instanceof ApiError) return `${err.message} (${err.code})`;
  if (err instanceof Error) return err.message;
  return String(err);
}

type Query = Record<string, string | number | undefined>;

/** A sandbox's proxy path: /v1/sandboxes/{id}/proxy/{port}/... */
const proxyPath = /^\/v1\/sandboxes\/([^/]+)\/proxy\/(\d+)(\/|$)/;

/** How long an endpoint token the cookie client asks for lives, and how
 * long before its end a new one is asked for. */
const tokenLife = 3600;
const tokenMargin = 300;

export class Client {
  /** Endpoint tokens by sandbox and port (the cookie client's proxy calls). */
  private readonly tokens = new Map<string, Promise<{ token: string; until: number }>>();

  /**
   * @param key the API key; null: the browser's session cookie
   *   authenticates (signed in through the identity provider).
   */
  constructor(
    readonly key: string | null,
    readonly base = "",
  ) {}

  /** Whether the session cookie authenticates (no API key). */
  get byCookie(): boolean {
    return this.key === null;
  }

  /** Headers a request of method carries: the key, or by cookie the CSRF header on a write. */
  headers(extra?: HeadersInit, method = "GET"): Headers {
    const h = new Headers(extra);
    if (this.key !== null) h.set(API_KEY_HEADER, this.key);
    else if (!["GET", "HEAD", "OPTIONS"].includes(method.toUpperCase())) h.set(CSRF_HEADER, "1");
    return h;
  }

  url(path: string, query?: Query): string {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) q.set(k, String(v));
    const s = q.toString();
    return this.base + path + (s ? "?" + s : "");
  }

  /** fetch with the key (or the cookie); non-2xx answers throw ApiError. */
  async raw(path: string, init: RequestInit = {}, query?: Query): Promise<Response> {
    const method = init.method ?? "GET";
    const box = this.key === null ? proxyPath.exec(path) : null;
    let headers: Headers;
    if (box) {
      // The proxy takes no cookie: an endpoint token of the box's port.
      headers = new Headers(init.headers);
      headers.set(PROXY_TOKEN_HEADER, await this.proxyToken(decodeURIComponent(box[1]), Number(box[2])));
    } else {
      headers = this.headers(init.headers, method);
    }
    const resp = await fetch(this.url(path, query), { ...init, headers, credentials: "same-origin" });
    if (!resp.ok) throw await toError(resp);
    return resp;
  }

  /** An endpoint token for a port of a sandbox, kept until shortly before it ends. */
  private async proxyToken(id: string, port: number): Promise<string> {
    const k = `${id}/${port}`;
    const now = Date.now() / 1000;
    let p = this.tokens.get(k);
    if (p) {
      const t = await p.catch(() => null);
      if (t && t.until > now) return t.token;
      if (this.tokens.get(k) === p) this.tokens.delete(k);
    }
    p = this.endpoint(id, port, tokenLife).then((ep) => {
      const token = ep.headers?.[PROXY_TOKEN_HEADER];
      if (!token) throw new ApiError(0, "NO_TOKEN", "the server handed out no endpoint token");
      const end = ep.expiresAt ? Date.parse(ep.expiresAt) / 1000 : now + tokenLife;
      return { token, until: end - tokenMargin };
    });
    this.tokens.set(k, p);
    p.catch(() => this.tokens.get(k) === p && this.tokens.delete(k));
    return (await p).token;
  }

  async json<T>(method: string, path: string, body?: unknown, query?: Query): Promise<T> {
    const init: RequestInit = { method };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = { "Content-Type": "application/json" };
    }
    const resp = await this.raw(path, init, query);
    if (resp.status === 204) return undefined as T;
    return (await resp.json()) as T;
  }

  // Sandboxes (/v1).
  listSandboxes = () => this.json<SandboxList>("GET", "/v1/sandboxes", undefined, { pageSize: 200 });
  getSandbox = (id: string) => this.json<Sandbox>("GET", `/v1/sandboxes/${id}`);
  createSandbox = (req: CreateSandboxRequest) => this.json<Sandbox>("POST", "/v1/sandboxes", req);
  deleteSandbox = (id: string) => this.json<void>("DELETE", `/v1/sandboxes/${id}`);
  pauseSandbox = (id: string) => this.json<void>("POST", `/v1/sandboxes/${id}/pause`);
  resumeSandbox = (id: string) => this.json<void>("POST", `/v1/sandboxes/${id}/resume`);
  renewSandbox = (id: string, expiresAt: Date) =>
    this.json<{ expiresAt: string }>("POST", `/v1/sandboxes/${id}/renew-expiration`, { expiresAt: expiresAt.toISOString() });
  endpoint = (id: string, port: number, lifetimeSeconds: number) =>
    this.json<Endpoint>("GET", `/v1/sandboxes/${id}/endpoints/${port}`, undefined, { expires: lifetimeSeconds });

  // execd of a sandbox, through the server's proxy.
  execdPath = (id: string, path: string) => `/v1/sandboxes/${id}/proxy/${EXECD_PORT}${path}`;
  listDir = (id: string, path: string) =>
    this.json<FileInfo[]>("GET", this.execdPath(id, "/directories/list"), undefined, { path, depth: 1 });
  download = (id: string, path: string) => this.raw(this.execdPath(id, "/files/download"), {}, { path });
  upload = (id: string, path: string, body: Blob) =>
    this.raw(this.execdPath(id, "/files/upload"), {
      method: "POST",
      body,
      headers: { "Content-Type": "application/octet-stream" },
    }, { path, size: body.size });
  createPTY = (id: string) => this.json<{ session_id: string }>("POST", this.execdPath(id, "/pty"), {});

  // Platform (/api/v1).
  profiles = () => this.json<Page<RuntimeProfile>>("GET", "/api/v1/runtime-profiles");
  putProfile = (p: RuntimeProfile) => this.json<RuntimeProfile>("PUT", `/api/v1/runtime-profiles/${enc(p.name)}`, p);
  deleteProfile = (name: string) => this.json<void>("DELETE", `/api/v1/runtime-profiles/${enc(name)}`);
  testModel = (name: string) => this.json<ModelCheck>("POST", `/api/v1/runtime-profiles/${enc(name)}/test-model`);
  agents = () => this.json<Page<Agent>>("GET", "/api/v1/agents", undefined, { limit: 200 });
  createAgent = (a: AgentRequest) => this.json<Agent>("POST", "/api/v1/agents", a);
  updateAgent = (id: string, a: AgentRequest) => this.json<Agent>("PUT", `/api/v1/agents/${id}`, a);
  deleteAgent = (id: string) => this.json<void>("DELETE", `/api/v1/agents/${id}`);
  vaults = () => this.json<Page<Vault>>("GET", "/api/v1/vaults", undefined, { limit: 200 });
  createVault = (v: VaultRequest) => this.json<Vault>("POST", "/api/v1/vaults", v);
  deleteVault = (id: string) => this.json<void>("DELETE", `/api/v1/vaults/${enc(id)}`);
  /** Creates or replaces a secret; the answer is the vault, without any value. */
  putSecret = (id: string, name: string, s: SecretRequest) =>
    this.json<Vault>("PUT", `/api/v1/vaults/${enc(id)}/secrets/${enc(name)}`, s);
  deleteSecret = (id: string, name: string) => this.json<void>("DELETE", `/api/v1/vaults/${enc(id)}/secrets/${enc(name)}`);
  sessions = (agentId: string) => this.json<Page<Session>>("GET", "/api/v1/sessions", undefined, { agent_id: agentId, limit: 200 });
  session = (id: string) => this.json<Session>("GET", `/api/v1/sessions/${id}`);
  /** Opens a Session; without a title it takes its first message's first line. */
  createSession = (agentId: string, title?: string) =>
    this.json<{ session_id: string }>("POST", `/api/v1/agents/${agentId}/conversations`, title ? { title } : {});
  deleteSession = (id: string) => this.json<void>("DELETE", `/api/v1/sessions/${id}`);
  messages = (id: string) => this.json<{ messages: UIMessage[]; last_seq: number }>("GET", `/api/v1/sessions/${id}/messages`);
  sendInput = (id: string, content: string, clientMessageId: string) =>
    this.json<Receipt>("POST", `/api/v1/sessions/${id}/turn-inputs`, { content, client_message_id: clientMessageId });
  interrupt = (id: string) => this.json<{ status: string }>("POST", `/api/v1/sessions/${id}/interrupt`, {});
  respond = (id: string, interactionId: string, answer: { decision: "approve" | "reject" } | { answers: string[] }) =>
    this.json<{ status: string }>("POST", `/api/v1/sessions/${id}/interaction-respond`, { interaction_id: interactionId, answer });

  // Agents' access (who may see, use and manage one).
  agentAccess = (id: string) => this.json<AgentAccess>("GET", `/api/v1/agents/${enc(id)}/access`);
  putAgentAccess = (id: string, a: AgentAccess) => this.json<AgentAccess>("PUT", `/api/v1/agents/${enc(id)}/access`, a);

  // The caller and its keys.
  currentUser = () => this.json<CurrentUser>("GET", "/api/v1/user/current");
  apiKeys = () => this.json<Page<APIKey>>("GET", "/api/v1/user/api-keys");
  createAPIKey = (k: APIKeyRequest) => this.json<NewAPIKey>("POST", "/api/v1/user/api-keys", k);
  revokeAPIKey = (id: string) => this.json<APIKey>("DELETE", `/api/v1/user/api-keys/${enc(id)}`);

  // Users, their keys and the audit log (administrators).
  users = (cursor?: string) => this.json<Page<User>>("GET", "/api/v1/admin/users", undefined, { limit: 200, cursor });
  createUser = (u: UserRequest) => this.json<User>("POST", "/api/v1/admin/users", u);
  updateUser = (id: string, u: UserRequest) => this.json<User>("PATCH", `/api/v1/admin/users/${enc(id)}`, u);
  userAPIKeys = (id: string) => this.json<Page<APIKey>>("GET", `/api/v1/admin/users/${enc(id)}/api-keys`);
  createUserAPIKey = (id: string, k: APIKeyRequest) => this.json<NewAPIKey>("POST", `/api/v1/admin/users/${enc(id)}/api-keys`, k);
  revokeUserAPIKey = (id: string, kid: string) => this.json<APIKey>("DELETE", `/api/v1/admin/users/${enc(id)}/api-keys/${enc(kid)}`);
  audit = (filter: { actor_id?: string; action?: string; target?: string }, cursor?: string) =>
    this.json<Page<AuditEntry>>("GET", "/api/v1/admin/audit", undefined, { ...filter, limit: 100, cursor });

  // Browser sign-in (public routes).
  authSession = () => this.json<AuthSession>("GET", "/api/v1/auth/session");
  /** Ends the browser's session (the cookie's); the CSRF header goes with it. */
  logout = () => this.raw("/api/v1/auth/logout", { method: "POST", headers: { [CSRF_HEADER]: "1" } });

  // Server.
  metrics = async () => (await fetch(this.base + "/metrics", { headers: this.headers() })).text();
}

const enc = encodeURIComponent;

async function toError(resp: Response): Promise<ApiError> {
  const text = await resp.text().catch(() => "");
  try {
    const body = JSON.parse(text) as { code?: string; message?: string };
    if (body.code) return new ApiError(resp.status, body.code, body.message ?? resp.statusText);
  } catch {
    // not JSON: fall through
  }
  return new ApiError(resp.status, `HTTP_${resp.status}`, text.trim() || resp.statusText);
}
