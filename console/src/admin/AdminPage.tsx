// Admin: Agents, RuntimeProfiles, credential vaults and warm pools.
import { href } from "../router";
import { AgentsAdmin } from "./AgentsAdmin";
import { ProfilesAdmin } from "./ProfilesAdmin";
import { PoolsAdmin } from "./PoolsAdmin";
import { VaultsAdmin } from "./VaultsAdmin";

const tabs = [
  { id: "agents", label: "Agents" },
  { id: "profiles", label: "Runtime profiles" },
  { id: "vaults", label: "Vaults" },
  { id: "pools", label: "Pools" },
] as const;

export function AdminPage({ route }: { route: string[] }) {
  const current = tabs.some((t) => t.id === route[0]) ? route[0] : "agents";
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
        {current === "agents" && <AgentsAdmin />}
        {current === "profiles" && <ProfilesAdmin />}
        {current === "vaults" && <VaultsAdmin />}
        {current === "pools" && <PoolsAdmin />}
      </div>
    </div>
  );
}
