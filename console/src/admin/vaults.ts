// Credential vaults: how a secret's destination reads, the request a
// secret form sends, and the text of a refused delete. Values are
// write-only: nothing here ever sees one come back.
import { ApiError, errorText } from "../api/client";
import type { Agent, SecretRequest, Vault, VaultSecret } from "../api/types";

/** A secret's name is the environment variable that holds its placeholder in a box. */
export const SECRET_NAME = "[A-Za-z_][A-Za-z0-9_]{0,127}";

/** Where a secret's value may go: "api.example.com/v1", or the host alone for every path. */
export function destination(s: VaultSecret): string {
  const prefix = s.path_prefix && s.path_prefix !== "/" ? s.path_prefix : "";
  return s.host + prefix;
}

/** The header the value fills and how: "Authorization: Bearer {value}". */
export function delivery(s: VaultSecret): string {
  return `${s.header || "Authorization"}: ${s.format || "{value}"}`;
}

/** What a secret form holds (the value is read apart, never kept in state). */
export interface SecretFields {
  name: string;
  host: string;
  path_prefix: string;
  header: string;
  format: string;
}

export const blankSecret: SecretFields = { name: "", host: "", path_prefix: "", header: "", format: "" };

/** A stored secret's fields, to replace it (with a new value). */
export function secretFields(s: VaultSecret): SecretFields {
  return { name: s.name, host: s.host, path_prefix: s.path_prefix ?? "", header: s.header ?? "", format: s.format ?? "" };
}

/** The PUT body: trimmed, blank fields left to the server's defaults. */
export function secretRequest(f: SecretFields, value: string): SecretRequest {
  const req: SecretRequest = { value, host: f.host.trim() };
  if (f.path_prefix.trim()) req.path_prefix = f.path_prefix.trim();
  if (f.header.trim()) req.header = f.header.trim();
  if (f.format.trim()) req.format = f.format.trim();
  return req;
}

/** The Agents whose vault_ids name the vault. */
export function agentsUsing(vaultId: string, agents: Agent[]): Agent[] {
  return agents.filter((a) => a.vault_ids?.includes(vaultId));
}

/** The text of a failed delete: for VAULT_IN_USE, the Agents by name and what to do. */
export function deleteErrorText(err: unknown, vault: Vault, agents: Agent[]): string {
  if (!(err instanceof ApiError) || err.code !== "VAULT_IN_USE") return errorText(err);
  const users = agentsUsing(vault.vault_id, agents).map((a) => a.name);
  const who = users.length > 0 ? `${users.length === 1 ? "agent" : "agents"} ${users.join(", ")}` : "some agents";
  return `Vault ${vault.name} is in use by ${who}: remove it from their vaults first (VAULT_IN_USE).`;
}

/** The names of the vaults ids name, in order; an unknown id stands for itself. */
export function vaultNames(ids: readonly string[] | null | undefined, vaults: Vault[]): string[] {
  return (ids ?? []).map((id) => vaults.find((v) => v.vault_id === id)?.name ?? id);
}

/** ids with id added (on) or removed (off), kept in the vaults' order. */
export function toggleId(ids: readonly string[], id: string, on: boolean, vaults: Vault[]): string[] {
  const set = new Set(ids);
  if (on) set.add(id);
  else set.delete(id);
  const order = vaults.map((v) => v.vault_id);
  return [...set].sort((a, b) => rank(order, a) - rank(order, b));
}

const rank = (order: string[], id: string) => {
  const i = order.indexOf(id);
  return i < 0 ? order.length : i;
};
