// Formatting of times and sizes for people.

const units: [Intl.RelativeTimeFormatUnit, number][] = [
  ["day", 86400],
  ["hour", 3600],
  ["minute", 60],
  ["second", 1],
];

const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

/** "in 5 minutes", "2 hours ago". */
export function relativeTime(iso: string | undefined, now = Date.now()): string {
  if (!iso) return "never";
  const secs = Math.round((new Date(iso).getTime() - now) / 1000);
  for (const [unit, size] of units) {
    if (Math.abs(secs) >= size || unit === "second") return rtf.format(Math.round(secs / size), unit);
  }
  return iso;
}

/** "1.5 KiB". */
export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const u = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < u.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${u[i]}`;
}

export function shortId(id: string): string {
  return id.length > 12 ? id.slice(0, 12) : id;
}
