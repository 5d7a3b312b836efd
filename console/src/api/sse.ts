// A reader of Server-Sent Events over fetch (EventSource cannot send the
// API key header).

export interface SSEEvent {
  id?: string;
  event?: string;
  data: string;
}

/** Yields each event of an SSE body until it ends. */
export async function* readSSE(body: ReadableStream<Uint8Array>): AsyncGenerator<SSEEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let ev: Partial<SSEEvent> & { data?: string } = {};
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.search(/\r?\n/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf[nl] === "\r" ? 2 : 1));
        if (line === "") {
          if (ev.data !== undefined) yield { id: ev.id, event: ev.event, data: ev.data };
          ev = {};
          continue;
        }
        if (line.startsWith(":")) continue; // a comment (keepalive)
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") ev.data = ev.data === undefined ? value : ev.data + "\n" + value;
        else if (field === "id") ev.id = value;
        else if (field === "event") ev.event = value;
      }
    }
  } finally {
    reader.releaseLock();
  }
}
