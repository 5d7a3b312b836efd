import { describe, expect, it, vi } from "vitest";
import { guardServiceWorkers, RELOAD_MARK, type GuardEnv } from "./swguard";

function memoryStorage(init: Record<string, string> = {}) {
  const m = new Map(Object.entries(init));
  return {
    map: m,
    getItem: (k: string) => m.get(k) ?? null,
    setItem: (k: string, v: string) => void m.set(k, v),
    removeItem: (k: string) => void m.delete(k),
  };
}

/** A registration and its unregister mock. */
function registration() {
  const unregister = vi.fn(async () => true);
  return { reg: { unregister } as unknown as ServiceWorkerRegistration, unregister };
}

function env(opts: { controlled: boolean; registrations: ServiceWorkerRegistration[]; reloaded?: boolean }) {
  const storage = memoryStorage(opts.reloaded ? { [RELOAD_MARK]: "1" } : {});
  const reload = vi.fn();
  const e: GuardEnv = {
    serviceWorker: {
      controller: opts.controlled ? ({} as ServiceWorker) : null,
      getRegistrations: async () => opts.registrations,
    },
    storage,
    reload,
  };
  return { e, storage, reload };
}

describe("service worker guard", () => {
  it("starts without service worker support", async () => {
    const storage = memoryStorage();
    const reload = vi.fn();
    expect(await guardServiceWorkers({ storage, reload })).toBe("ok");
    expect(reload).not.toHaveBeenCalled();
  });

  it("starts when no worker is registered", async () => {
    const { e, reload } = env({ controlled: false, registrations: [] });
    expect(await guardServiceWorkers(e)).toBe("ok");
    expect(reload).not.toHaveBeenCalled();
  });

  it("unregisters a worker that does not control the page, and starts", async () => {
    const r = registration();
    const { e, reload } = env({ controlled: false, registrations: [r.reg] });
    expect(await guardServiceWorkers(e)).toBe("ok");
    expect(r.unregister).toHaveBeenCalledOnce();
    expect(reload).not.toHaveBeenCalled();
  });

  it("unregisters the worker that controls the page and reloads once", async () => {
    const r = registration();
    const { e, reload, storage } = env({ controlled: true, registrations: [r.reg] });
    expect(await guardServiceWorkers(e)).toBe("reloading");
    expect(r.unregister).toHaveBeenCalledOnce();
    expect(reload).toHaveBeenCalledOnce();
    expect(storage.map.get(RELOAD_MARK)).toBe("1");
  });

  it("refuses to start when still controlled after the reload", async () => {
    const { e, reload } = env({ controlled: true, registrations: [], reloaded: true });
    expect(await guardServiceWorkers(e)).toBe("refused");
    expect(reload).not.toHaveBeenCalled();
  });

  it("starts, and forgets the reload, once the page is free", async () => {
    const { e, storage } = env({ controlled: false, registrations: [], reloaded: true });
    expect(await guardServiceWorkers(e)).toBe("ok");
    expect(storage.map.has(RELOAD_MARK)).toBe(false);
  });

  it("still checks the controller when registrations cannot be read", async () => {
    const { e, reload } = env({ controlled: true, registrations: [] });
    e.serviceWorker!.getRegistrations = async () => {
      throw new Error("blocked");
    };
    expect(await guardServiceWorkers(e)).toBe("reloading");
    expect(reload).toHaveBeenCalledOnce();
  });
});
