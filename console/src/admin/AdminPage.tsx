// Admin (the admin scope only): users, runtime profiles, credential
// vaults, warm pools and the audit log. Agents have a section of their own.
import { useCan } from "../auth";
import { href } from "../router";
import { Empty } from "../ui/states";
import { UsersAdmin } from "./UsersAdmin";
import { ProfilesAdmin } from "./ProfilesAdmin";
import { PoolsAdmin } from "./PoolsAdmin";
import { VaultsAdmin } from "./VaultsAdmin";
import { AuditAdmin } from "./AuditAdmin";

const tabs = [
  { id: "users", label: "Users" },
  { id: "profiles", label: "Runtime profiles" },
  { id: "vaults", label: "Vaults" },
  { id: "pools", label: "Pools" },
  { id: "audit", label: "Audit log" },
] as const;

export function AdminPage({ route }: { route: string[] }) {
  const admin = useCan("admin");
  const current = tabs.some((t) => t.id === route[0]) ? route[0] : "users";
  if (!admin) {
    return (
      <div className="page">
        <Empty title="For administrators">Your role does not include administration. Ask an administrator.</Empty>
      </div>
    );
  }
  return (
    <div className="page">
      <h1>Admin</h1>
      <div role="tablist" aria-label="Admin sections" className="tabs">
        {tabs.map((t) => (
          <a key={t.id} role="tab" aria-selected={current === t.id} href={href("admin", t.id)}>
            {t.label}
          </a>
        ))}
      </div>
      <div role="tabpanel" className="tabpanel">
        {current === "users" && <UsersAdmin />}
        {current === "profiles" && <ProfilesAdmin />}
        {current === "vaults" && <VaultsAdmin />}
        {current === "pools" && <PoolsAdmin />}
        {current === "audit" && <AuditAdmin />}
      </div>
    </div>
  );
}
