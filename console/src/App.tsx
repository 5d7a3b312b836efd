// The console's shell: sign-in, the top bar and the three sections.
import { AuthGate, useSignOut } from "./auth";
import { href, useRoute } from "./router";
import { ChatPage } from "./chat/ChatPage";
import { SandboxesPage } from "./sandboxes/SandboxesPage";
import { AdminPage } from "./admin/AdminPage";

const sections = [
  { id: "chat", label: "Chat" },
  { id: "sandboxes", label: "Sandboxes" },
  { id: "admin", label: "Admin" },
] as const;

export function App() {
  return (
    <AuthGate>
      <Shell />
    </AuthGate>
  );
}

function Shell() {
  const route = useRoute();
  const signOut = useSignOut();
  const section = sections.some((s) => s.id === route[0]) ? route[0] : "chat";
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
          {sections.map((s) => (
            <a key={s.id} href={href(s.id)} aria-current={section === s.id ? "page" : undefined}>
              {s.label}
            </a>
          ))}
        </nav>
        <button className="ghost" onClick={signOut}>
          Sign out
        </button>
      </header>
      <main id="main" className="content" tabIndex={-1}>
        {section === "chat" && <ChatPage route={rest} />}
        {section === "sandboxes" && <SandboxesPage route={rest} />}
        {section === "admin" && <AdminPage route={rest} />}
      </main>
    </div>
  );
}
