// Warm pools: per profile with a poolSize, the ready boxes and the claims
// (hits and misses) since the server started.
import { useEffect } from "react";
import { useClient } from "../auth";
import { useAsync } from "../ui/useAsync";
import { Empty, ErrorBanner, Loading } from "../ui/states";
import { parsePools } from "./metrics";

const refreshEvery = 5000;

export function PoolsAdmin() {
  const client = useClient();
  const data = useAsync(async () => {
    const [profiles, metrics] = await Promise.all([client.profiles(), client.metrics()]);
    return { profiles: profiles.items.filter((p) => (p.poolSize ?? 0) > 0), pools: parsePools(metrics) };
  }, [client]);
  const { reload } = data;
  useEffect(() => {
    const t = setInterval(() => void reload(), refreshEvery);
    return () => clearInterval(t);
  }, [reload]);
  if (data.error) return <ErrorBanner error={data.error} onRetry={data.reload} />;
  if (!data.data) return <Loading label="Loading pools…" />;
  const { profiles, pools } = data.data;
  if (profiles.length === 0 && pools.length === 0) {
    return <Empty title="No warm pools">Give a runtime profile a pool size to keep that many sandboxes ready.</Empty>;
  }
  return (
    <div className="table-wrap">
      <table className="table" aria-label="Warm pools">
        <thead>
          <tr>
            <th scope="col">Profile</th>
            <th scope="col">Size</th>
            <th scope="col">Ready</th>
            <th scope="col">Claims (hit / miss)</th>
          </tr>
        </thead>
        <tbody>
          {profiles.map((p) => {
            const mine = pools.filter((f) => f.profile === p.name);
            const sum = (k: "ready" | "hits" | "misses") => mine.reduce((n, f) => n + f[k], 0);
            return (
              <tr key={p.name}>
                <td>{p.name}</td>
                <td>{p.poolSize}</td>
                <td>
                  <meter min={0} max={p.poolSize} value={sum("ready")} aria-label={`${p.name} ready`} /> {sum("ready")}
                </td>
                <td>
                  {sum("hits")} / {sum("misses")}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
