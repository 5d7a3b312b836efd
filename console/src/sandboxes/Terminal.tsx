// A terminal in a sandbox: xterm.js on execd's PTY WebSocket, reached
// through the server's proxy with a short-lived endpoint token (a browser
// WebSocket cannot send the API key header).
import { useEffect, useRef, useState } from "react";
import { Terminal as XTerm } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import "@xterm/xterm/css/xterm.css";
import { useClient } from "../auth";
import { EXECD_PORT, errorText, type Client } from "../api/client";

/** PTY WebSocket channel bytes (execd/wire). */
const STDIN = 0x00;
const STDOUT = 0x01;
const STDERR = 0x02;
const REPLAY = 0x03;
const REPLAY_HEADER = 9;

/** The token header an endpoint hands out (api.HeaderProxyToken). */
const TOKEN_HEADER = "X-AstraBox-Proxy-Token";

type Status = { kind: "connecting" } | { kind: "connected" } | { kind: "exited"; code?: number } | { kind: "failed"; message: string };

const dark = { background: "#0d1117", foreground: "#e6edf3", cursor: "#e6edf3", selectionBackground: "#264f78" };
const light = { background: "#ffffff", foreground: "#1f2328", cursor: "#1f2328", selectionBackground: "#b6d7ff" };

export function Terminal({ sandboxId }: { sandboxId: string }) {
  const client = useClient();
  const host = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState<Status>({ kind: "connecting" });
  const [attempt, setAttempt] = useState(0);

  useEffect(() => {
    const el = host.current;
    if (!el) return;
    const scheme = window.matchMedia("(prefers-color-scheme: dark)");
    const term = new XTerm({
      cursorBlink: true,
      fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', monospace",
      fontSize: 14,
      theme: scheme.matches ? dark : light,
    });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(el);
    fit.fit();
    setStatus({ kind: "connecting" });
    const conn = connect(client, sandboxId, term, setStatus);
    const onResize = () => fit.fit();
    const onScheme = () => (term.options.theme = scheme.matches ? dark : light);
    window.addEventListener("resize", onResize);
    scheme.addEventListener("change", onScheme);
    term.focus();
    return () => {
      window.removeEventListener("resize", onResize);
      scheme.removeEventListener("change", onScheme);
      conn.close();
      term.dispose();
    };
  }, [client, sandboxId, attempt]);

  return (
    <div className="terminal">
      <div className="terminal-bar">
        <span className={`badge term-${status.kind}`} data-testid="terminal-status" role="status">
          {label(status)}
        </span>
        {(status.kind === "exited" || status.kind === "failed") && (
          <button onClick={() => setAttempt((n) => n + 1)}>New shell</button>
        )}
      </div>
      <div ref={host} className="terminal-host" aria-label="Terminal" data-testid="terminal" />
    </div>
  );
}

function label(s: Status): string {
  switch (s.kind) {
    case "connecting":
      return "Connecting…";
    case "connected":
      return "Connected";
    case "exited":
      return `Shell exited${s.code !== undefined ? ` (${s.code})` : ""}`;
    case "failed":
      return `Failed: ${s.message}`;
  }
}

/**
 * Starts a shell session in the box and attaches term to it; close()
 * detaches and ends the shell.
 */
function connect(client: Client, sandboxId: string, term: XTerm, setStatus: (s: Status) => void): { close: () => void } {
  let ws: WebSocket | null = null;
  let ptyId: string | null = null;
  let closed = false;
  const enc = new TextEncoder();
  const disposables: { dispose(): void }[] = [];
  const removePTY = () => {
    if (ptyId) void client.json("DELETE", client.execdPath(sandboxId, `/pty/${ptyId}`)).catch(() => undefined);
  };

  (async () => {
    const [{ session_id }, ep] = await Promise.all([
      client.createPTY(sandboxId),
      client.endpoint(sandboxId, EXECD_PORT, 3600),
    ]);
    ptyId = session_id;
    if (closed) return removePTY();
    const proto = window.location.protocol === "https:" ? "wss:" : "ws:";
    const q = new URLSearchParams({ astrabox_token: ep.headers?.[TOKEN_HEADER] ?? "", cols: String(term.cols), rows: String(term.rows) });
    ws = new WebSocket(`${proto}//${window.location.host}${client.execdPath(sandboxId, `/pty/${session_id}/ws`)}?${q}`);
    ws.binaryType = "arraybuffer";
    ws.onmessage = (m) => {
      if (typeof m.data === "string") {
        const f = JSON.parse(m.data) as { type: string; exit_code?: number; error?: string };
        if (f.type === "connected") setStatus({ kind: "connected" });
        else if (f.type === "exit") setStatus({ kind: "exited", code: f.exit_code });
        else if (f.type === "error") setStatus({ kind: "failed", message: f.error ?? "error" });
        return;
      }
      const b = new Uint8Array(m.data as ArrayBuffer);
      if (b[0] === STDOUT || b[0] === STDERR) term.write(b.subarray(1));
      else if (b[0] === REPLAY) term.write(b.subarray(REPLAY_HEADER));
    };
    ws.onclose = (e) => {
      if (!closed && e.code !== 1000) setStatus({ kind: "failed", message: e.reason || `connection closed (${e.code})` });
    };
    disposables.push(
      term.onData((d) => {
        if (ws?.readyState !== WebSocket.OPEN) return;
        const data = enc.encode(d);
        const frame = new Uint8Array(data.length + 1);
        frame[0] = STDIN;
        frame.set(data, 1);
        ws.send(frame);
      }),
      term.onResize(({ cols, rows }) => {
        if (ws?.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "resize", cols, rows }));
      }),
    );
  })().catch((err: unknown) => {
    if (!closed) setStatus({ kind: "failed", message: errorText(err) });
  });

  return {
    close() {
      closed = true;
      disposables.forEach((d) => d.dispose());
      ws?.close(1000);
      removePTY();
    },
  };
}
