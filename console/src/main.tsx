import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App";
import { guardServiceWorkers } from "./swguard";
import "./styles.css";

const root = createRoot(document.getElementById("root")!);

// Nothing runs, and no credential is sent, under a service worker the
// console did not register (see swguard.ts).
void guardServiceWorkers({
  serviceWorker: navigator.serviceWorker,
  storage: sessionStorage,
  reload: () => window.location.reload(),
}).then((result) => {
  if (result === "ok") {
    root.render(
      <StrictMode>
        <App />
      </StrictMode>,
    );
  } else if (result === "refused") {
    root.render(<ForeignWorker />);
  }
});

/** What the console shows instead of starting under a foreign worker. */
function ForeignWorker() {
  return (
    <main className="signin">
      <div className="card signin-card" role="alert">
        <h1>AstraBox</h1>
        <p className="error">
          This page is controlled by a service worker the console did not install, which could read what you type
          here. The console has not started and sent nothing.
        </p>
        <p className="muted">
          The worker has been unregistered. Close every tab of this site, then open the console again. If this
          message comes back, clear this site's data in the browser's settings.
        </p>
      </div>
    </main>
  );
}
