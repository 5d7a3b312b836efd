// The console's shell: sign-in, the top bar (sections, the user's menu)
// and the sections. What the caller's scopes do not allow is not offered:
// Admin only with the admin scope.
import { AuthGate, useCan } from "./auth";
import { href, useRoute } from "./router";
import { ChatPage } from "./chat/ChatPage";
import { SandboxesPage } from "./sandboxes/SandboxesPage";
import { AgentsPage } from "./admin/AgentsAdmin";
import { AdminPage } from "./admin/AdminPage";
import { KeysPage } from "./account/KeysPage";
import { UserMenu } from "./account/UserMenu";

const sections = [
  { id: "chat", label: "Chat", admin: false },
  { id: "sandboxes", label: "Sandboxes", admin: false },
  { id: "agents", label: "Agents", admin: false },
  { id: "admin", label: "Admin", admin: true },
] as const;

export function App() {
  return (
    <AuthGate>
      <Shell />
    </AuthGate>
  );
}

/** The section a route shows: #/admin/agents, an older address, is Agents. */
function sectionOf(route: string[]): string {
  if (route[0] === "admin" && route[1] === "agents") return "agents";
  if (route[0] === "keys" || sections.some((s) => s.id === route[0])) return route[0];
  return "chat";
}

function Shell() {
  const route = useRoute();
  const admin = useCan("admin");
  const section = sectionOf(route);
  const rest = route.slice(1);
  return (
    <div className="app">
      <button className="skip" onClick={() => document.getElementById("main")?.focus()}>
        Skip to content
      </button>
      <header className="topbar">
        <a className="brand" href={href("chat")}>
          <img src="/console/favicon.svg" alt="" width={22} height={22} />
          <span>AstraBox</span>
        </a>
        <nav aria-label="Sections">
          {sections
            .filter((s) => admin || !s.admin)
            .map((s) => (
              <a key={s.id} href={href(s.id)} aria-current={section === s.id ? "page" : undefined}>
                {s.label}
              </a>
            ))}
        </nav>
        <UserMenu />
      </header>
      <main id="main" className="content" tabIndex={-1}>
        {section === "chat" && <ChatPage route={rest} />}
        {section === "sandboxes" && <SandboxesPage route={rest} />}
        {section === "agents" && <AgentsPage />}
        {section === "keys" && <KeysPage />}
        {section === "admin" && <AdminPage route={rest} />}
      </main>
    </div>
  );
}
