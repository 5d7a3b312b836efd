// Wire shapes of identity's routes (identity/wire, api/identityapi) and of
// an Agent's access (AgentAccess in api/openapi.yaml): users, API keys,
// the caller, the audit log and browser sign-in. Only the fields the
// console uses.

export type Role = "admin" | "member" | "viewer";
export type Scope = "read" | "write" | "admin";

/** The scopes each role allows (a key's are within its user's role). */
export const roleScopes: Record<Role, Scope[]> = {
  admin: ["read", "write", "admin"],
  member: ["read", "write"],
  viewer: ["read"],
};

export const roles: Role[] = ["admin", "member", "viewer"];

export interface User {
  user_id: string;
  /** "human" (signs in through the identity provider) or "service" (keys only). */
  kind: "human" | "service" | string;
  issuer?: string;
  subject?: string;
  email?: string;
  display_name?: string;
  role: Role | string;
  disabled: boolean;
  org_id?: string;
  created_at: string;
  last_login_at: string | null;
  version?: number;
}

/** POST /api/v1/admin/users (create) or PATCH .../{id} (only the fields given change). */
export interface UserRequest {
  user_id?: string;
  kind?: "human" | "service";
  email?: string;
  display_name?: string;
  role?: Role;
  disabled?: boolean;
}

/** GET /api/v1/user/current: who the caller is and what this request may do. */
export interface CurrentUser {
  user: User;
  scopes: Scope[] | string[];
  /** The key the request presented (absent for the bootstrap key or a browser session). */
  key_id?: string;
}

export interface APIKey {
  key_id: string;
  user_id: string;
  name: string;
  scopes: string[];
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
}

export interface APIKeyRequest {
  name: string;
  /** Default: every scope of the owner's role. */
  scopes?: Scope[];
  expires_in_seconds?: number;
}

/** A key just made: key is its whole text, shown this once. */
export interface NewAPIKey extends APIKey {
  key: string;
}

export interface AuditEntry {
  seq: number;
  at: string;
  actor_id: string;
  action: string;
  target: string;
  request_id: string;
  detail?: unknown;
}

/** The sign-in a server offers besides API keys. */
export interface AuthProvider {
  /** Shown on the sign-in button. */
  name: string;
  issuer: string;
  /** GET it (with ?next=<path>) to sign in. */
  login_url: string;
}

/** GET /api/v1/auth/session (public). */
export interface AuthSession {
  provider: AuthProvider | null;
  /** Who the browser's session cookie signs in. */
  user: User | null;
  csrf_header: string;
}

export type Visibility = "private" | "shared" | "public";

/** GET/PUT /api/v1/agents/{id}/access. */
export interface AgentAccess {
  visibility: Visibility;
  allowed_user_ids?: string[] | null;
  admins?: string[] | null;
}
