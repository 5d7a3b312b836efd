// Wire shapes of the AstraBox API the console reads (api/openapi.yaml,
// api/wire, platform/wire): only the fields it uses. The agent platform's
// (Agent, Session, Vault, ...) are checked against platform/wire's Go types
// by platform/wire/console_types_test.go.

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

export type SandboxState =
  | "Pending"
  | "Running"
  | "Pausing"
  | "Paused"
  | "Resuming"
  | "Stopping"
  | "Terminated"
  | "Failed";

export interface Sandbox {
  id: string;
  image?: { uri: string };
  status: { state: SandboxState; reason?: string; message?: string; lastTransitionAt: string };
  metadata?: Record<string, string>;
  entrypoint: string[];
  expiresAt?: string;
  createdAt: string;
  backend?: string;
  profile?: string;
  idleTimeout?: number;
}

export interface SandboxList {
  items: Sandbox[];
  pagination: { page: number; pageSize: number; totalItems: number; totalPages: number; hasNextPage: boolean };
}

export interface CreateSandboxRequest {
  timeout: number | null;
  image?: { uri: string };
  entrypoint?: string[];
  extensions?: Record<string, string>;
  metadata?: Record<string, string>;
}

/** One state transition of GET /v1/sandboxes/{id}/events. */
export interface StateEvent {
  seq: number;
  sandboxId: string;
  state: SandboxState;
  reason?: string;
  at: string;
}

export interface Endpoint {
  endpoint: string;
  headers?: Record<string, string>;
  expiresAt?: string;
}

export interface ModelEndpoint {
  base_url: string;
  api?: string;
  api_key?: string; // write-only
  models?: string[];
  retries?: number; // resends of a request that failed before its answer (default 3)
}

export interface RuntimeProfile {
  name: string;
  backend?: string;
  image?: string;
  resources?: { milliCpu?: number; memoryBytes?: number; pids?: number; diskBytes?: number };
  network?: string;
  timeout?: number;
  idleTimeout?: number;
  entrypoint?: string[];
  poolSize?: number;
  engine_kinds?: string[];
  model?: ModelEndpoint;
  session_limits?: SessionLimits;
  version?: number;
  api_key_set?: boolean;
}

// SessionLimits bound what one Session may cost the server; an omitted or
// zero field takes the server's default.
export interface SessionLimits {
  native_state_bytes?: number;
  reply_bytes?: number;
  reply_frames?: number;
  session_bytes?: number;
  frames_per_second?: number;
}

export interface ModelCheck {
  ok: boolean;
  model: string;
  status: number;
  latency_ms: number;
  message?: string;
}

export interface Agent {
  agent_id: string;
  name: string;
  engine_kind: string;
  runtime_profile: string;
  model: string;
  instructions: string;
  permission_mode: "auto" | "ask" | string;
  tools: string[];
  vault_ids?: string[] | null;
  /** The user that made it. */
  owner_id?: string;
  /** Who may see it besides its owner, its admins and administrators (AgentAccess). */
  visibility?: "private" | "shared" | "public" | string;
  allowed_user_ids?: string[] | null;
  admins?: string[] | null;
  version: number;
  created_at?: string;
}

export type AgentRequest = Omit<
  Agent,
  "agent_id" | "version" | "created_at" | "tools" | "owner_id" | "visibility" | "allowed_user_ids" | "admins"
> & {
  tools?: string[];
  version?: number;
};

/** A vault's secret as the server shows it: where it goes, never its value. */
export interface VaultSecret {
  name: string;
  host: string;
  path_prefix: string;
  header: string;
  format: string;
  updated_at?: string;
}

export interface Vault {
  vault_id: string;
  name: string;
  description: string;
  secrets: VaultSecret[] | null;
  version: number;
  created_at?: string;
  updated_at?: string;
}

/** PUT /api/v1/vaults/{id}/secrets/{name}: value is write-only and required every time. */
export interface SecretRequest {
  value: string;
  host: string;
  path_prefix?: string;
  header?: string;
  format?: string;
}

export interface VaultRequest {
  name: string;
  description?: string;
  version?: number;
}

export type SessionState =
  | "CREATING"
  | "READY"
  | "BUSY"
  | "INTERRUPTING"
  | "RECOVERY_REQUIRED"
  | "TERMINATED"
  | "DELETED";

/** An approval or question a reply waits on (wire.Interaction). */
export interface Interaction {
  interaction_id: string;
  kind: "approval" | "question" | string;
  tool_call_id?: string;
  tool_name?: string;
  input?: unknown;
  questions?: string[];
}

export interface Session {
  session_id: string;
  agent_id: string;
  engine_kind: string;
  state: SessionState;
  title: string;
  current_turn_id: string | null;
  last_seq: number;
  pending_interaction: Interaction | null;
  pending_inputs: { input_id: string; turn_id: string; seq: number; state: string }[] | null;
  sandbox_id: string | null;
  /** The user that opened the conversation. */
  owner_id?: string;
  created_at: string;
  updated_at: string;
}

export interface Receipt {
  input_id: string;
  turn_id: string;
  client_message_id: string;
  seq: number;
  state: string;
}

/** A directory entry of execd's GET /directories/list. */
export interface FileInfo {
  path: string;
  type: "file" | "directory" | "symlink" | "other";
  size: number;
  modified_at: string;
  mode: number;
}
