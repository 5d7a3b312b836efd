// The console registers no service worker. A worker on its origin was
// put there by something else (a page served through the sandbox proxy
// could once register one over the whole origin) and would see every
// request the console makes, the API key included. So before the console
// starts, every registration on the origin is removed; a page a worker
// already controls is reloaded once, without it, and if it is still
// controlled after that, the console refuses to start.

/** Marks, in this tab's session storage, that the guard reloaded once. */
export const RELOAD_MARK = "astrabox.serviceWorkerGuard";

/** ok: start; reloading: a reload is under way; refused: do not start. */
export type GuardResult = "ok" | "reloading" | "refused";

export interface GuardEnv {
  /** navigator.serviceWorker: absent without support (or outside a secure context). */
  serviceWorker?: Pick<ServiceWorkerContainer, "controller" | "getRegistrations">;
  storage: Pick<Storage, "getItem" | "setItem" | "removeItem">;
  reload: () => void;
}

/**
 * Unregisters every service worker of the origin and says whether the
 * console may start; it reloads the page (once per tab) when a worker
 * controls it. Never throws.
 */
export async function guardServiceWorkers(env: GuardEnv): Promise<GuardResult> {
  const sw = env.serviceWorker;
  if (!sw) return "ok";
  let registrations: readonly ServiceWorkerRegistration[] = [];
  try {
    registrations = await sw.getRegistrations();
  } catch {
    // Storage blocked: there is nothing to unregister; the controller
    // check below still holds.
  }
  await Promise.all(registrations.map((r) => r.unregister().catch(() => false)));
  if (!sw.controller) {
    env.storage.removeItem(RELOAD_MARK);
    return "ok";
  }
  if (env.storage.getItem(RELOAD_MARK) === null) {
    env.storage.setItem(RELOAD_MARK, "1");
    env.reload();
    return "reloading";
  }
  return "refused";
}
