// The typed client of the AstraBox API: every call the console makes goes
// through here, with the API key header, and fails with an ApiError that
// carries the server's {code, message}.
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

/** The header that carries the API key (api.HeaderAPIKey). */
export const API_KEY_HEADER = "OPEN-SANDBOX-API-KEY";

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

export class Client {
  constructor(
    readonly key: string,
    readonly base = "",
  ) {}

  /** Headers every authenticated request carries. */
  headers(extra?: HeadersInit): Headers {
    const h = new Headers(extra);
    h.set(API_KEY_HEADER, this.key);
    return h;
  }

  url(path: string, query?: Query): string {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) q.set(k, String(v));
    const s = q.toString();
    return this.base + path + (s ? "?" + s : "");
  }

  /** fetch with the key; non-2xx answers throw ApiError. */
  async raw(path: string, init: RequestInit = {}, query?: Query): Promise<Response> {
    const resp = await fetch(this.url(path, query), { ...init, headers: this.headers(init.headers) });
    if (!resp.ok) throw await toError(resp);
    return resp;
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
  createSession = (agentId: string, title: string) =>
    this.json<{ session_id: string }>("POST", `/api/v1/agents/${agentId}/conversations`, { title });
  deleteSession = (id: string) => this.json<void>("DELETE", `/api/v1/sessions/${id}`);
  messages = (id: string) => this.json<{ messages: UIMessage[]; last_seq: number }>("GET", `/api/v1/sessions/${id}/messages`);
  sendInput = (id: string, content: string, clientMessageId: string) =>
    this.json<Receipt>("POST", `/api/v1/sessions/${id}/turn-inputs`, { content, client_message_id: clientMessageId });
  interrupt = (id: string) => this.json<{ status: string }>("POST", `/api/v1/sessions/${id}/interrupt`, {});
  respond = (id: string, interactionId: string, answer: { decision: "approve" | "reject" } | { answers: string[] }) =>
    this.json<{ status: string }>("POST", `/api/v1/sessions/${id}/interaction-respond`, { interaction_id: interactionId, answer });

  // Server.
  metrics = async () => (await fetch(this.base + "/metrics")).text();
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
