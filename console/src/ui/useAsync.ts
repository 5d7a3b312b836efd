// useAsync runs a load function and tracks its loading, error and data,
// with reload() to run it again (keeping the old data meanwhile).
import { useCallback, useEffect, useRef, useState } from "react";

export interface Async<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload: () => Promise<void>;
}

export function useAsync<T>(load: () => Promise<T>, deps: readonly unknown[]): Async<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [loading, setLoading] = useState(true);
  const run = useRef(0);
  const go = useCallback(load, deps);
  const reload = useCallback(async () => {
    const n = ++run.current;
    setLoading(true);
    try {
      const v = await go();
      if (n === run.current) {
        setData(v);
        setError(undefined);
      }
    } catch (err) {
      if (n === run.current) setError(err);
    } finally {
      if (n === run.current) setLoading(false);
    }
  }, [go]);
  useEffect(() => {
    setData(undefined);
    void reload();
  }, [reload]);
  return { data, error, loading, reload };
}
