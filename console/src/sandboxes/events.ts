// EventFollowers follows the state event streams of a set of sandboxes
// (GET /v1/sandboxes/{id}/events), each resumed from its last seq when it
// drops, and reports every event. A browser keeps about six connections
// per server, so at most `max` sandboxes are followed at once; the rest
// are refreshed by the list's periodic reload.
import { ApiError, type Client } from "../api/client";
import type { StateEvent } from "../api/types";
import { readSSE } from "../api/sse";

const terminal = new Set(["Terminated", "Failed"]);
const retryAfterMs = 2000;

export class EventFollowers {
  private readonly live = new Map<string, AbortController>();
  private readonly seqs = new Map<string, number>();

  constructor(
    private readonly client: Client,
    private readonly onEvent: (e: StateEvent) => void,
    private readonly max = 4,
  ) {}

  /** Follows exactly the first `max` of ids (stopping the others). */
  sync(ids: string[]): void {
    const want = new Set(ids.slice(0, this.max));
    for (const [id, ctl] of this.live) {
      if (!want.has(id)) {
        ctl.abort();
        this.live.delete(id);
      }
    }
    for (const id of want) {
      if (this.live.has(id)) continue;
      const ctl = new AbortController();
      this.live.set(id, ctl);
      void this.follow(id, ctl.signal);
    }
  }

  close(): void {
    this.sync([]);
  }

  private async follow(id: string, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        const resp = await this.client.raw(`/v1/sandboxes/${id}/events`, { signal }, { after: this.seqs.get(id) ?? 0 });
        if (!resp.body) return;
        for await (const ev of readSSE(resp.body)) {
          const e = JSON.parse(ev.data) as StateEvent;
          this.seqs.set(id, e.seq);
          this.onEvent(e);
          if (terminal.has(e.state)) return;
        }
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof ApiError && err.status === 404) return; // gone
      }
      await new Promise((r) => setTimeout(r, retryAfterMs));
    }
  }
}
