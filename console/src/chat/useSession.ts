// useSession keeps a Session's record fresh: read now, again every few
// seconds, and whenever refresh() is called. Each record read is also
// announced to the page (sessionEvent), so lists show it at once.
import { useCallback, useEffect, useState } from "react";
import type { Client } from "../api/client";
import type { Session } from "../api/types";

const every = 2000;

/** The window event that carries a freshly read Session. */
export const sessionEvent = "astrabox:session";

export function useSession(client: Client, id: string): { session: Session | null; error: unknown; refresh: () => void } {
  const [session, setSession] = useState<Session | null>(null);
  const [error, setError] = useState<unknown>(undefined);
  const refresh = useCallback(() => {
    client.session(id).then(
      (s) => {
        setSession(s);
        setError(undefined);
        window.dispatchEvent(new CustomEvent<Session>(sessionEvent, { detail: s }));
      },
      (err: unknown) => setError(err),
    );
  }, [client, id]);
  useEffect(() => {
    refresh();
    const t = setInterval(refresh, every);
    return () => clearInterval(t);
  }, [refresh]);
  return { session, error, refresh };
}
