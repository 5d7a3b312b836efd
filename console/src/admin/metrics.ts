// Reading warm pool figures from the server's Prometheus text (/metrics):
// astrabox_pool_ready{pool} and astrabox_pool_claims_total{pool,outcome}.
// A pool's key is "<profile>/<shape hash>".

export interface PoolFigures {
  pool: string;
  profile: string;
  ready: number;
  hits: number;
  misses: number;
}

const line = /^(astrabox_pool_ready|astrabox_pool_claims_total)\{([^}]*)\}\s+([0-9.eE+-]+)$/;
const label = /(\w+)="((?:[^"\\]|\\.)*)"/g;

export function parsePools(text: string): PoolFigures[] {
  const pools = new Map<string, PoolFigures>();
  const get = (pool: string) => {
    let p = pools.get(pool);
    if (!p) {
      p = { pool, profile: pool.split("/")[0], ready: 0, hits: 0, misses: 0 };
      pools.set(pool, p);
    }
    return p;
  };
  for (const l of text.split("\n")) {
    const m = line.exec(l.trim());
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const [, k, v] of m[2].matchAll(label)) labels[k] = v.replace(/\\(.)/g, "$1");
    if (!labels.pool) continue;
    const p = get(labels.pool);
    const n = Number(m[3]);
    if (m[1] === "astrabox_pool_ready") p.ready = n;
    else if (labels.outcome === "hit") p.hits = n;
    else if (labels.outcome === "miss") p.misses = n;
  }
  return [...pools.values()].sort((a, b) => a.pool.localeCompare(b.pool));
}
