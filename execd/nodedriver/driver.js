// AstraBox code-context driver for JavaScript and TypeScript: a persistent
// node process that runs notebook-style cells for execd. It speaks the
// protocol of package pydriver (see pydriver.go and nodedriver.go).
//
// fd 0 is /dev/null, fds 1 and 2 are pipes execd reads as the cell's output
// (on Linux, node writes to pipes synchronously, so console.log output
// precedes the marker), fd 3 carries requests (one JSON object per line)
// and fd 4 carries control messages back. The bootstrap hands this file
// REQUESTS_FD, LANGUAGE ("javascript" or "typescript") and require.
"use strict";

const fs = require("node:fs");
const vm = require("node:vm");
const util = require("node:util");
const readline = require("node:readline");

const CONTROL_FD = 4;
const MAX_TEXT = 4 << 20;

function send(msg) {
  let data = Buffer.from(JSON.stringify(msg) + "\n", "utf8");
  while (data.length > 0) {
    const n = fs.writeSync(CONTROL_FD, data);
    data = data.subarray(n);
  }
}

function clip(text) {
  return text.length > MAX_TEXT ? text.slice(0, MAX_TEXT) + "... [truncated]" : text;
}

// stripTypes turns a TypeScript cell into JavaScript, or is null when this
// node cannot (module.stripTypeScriptTypes: node 22.13+ and 23.2+).
const stripTypes = (() => {
  const strip = require("node:module").stripTypeScriptTypes;
  if (typeof strip !== "function") return null;
  return (code) => {
    // It warns that it is experimental on every first use; the cell's
    // stderr is not the place for that.
    const emit = process.emitWarning;
    process.emitWarning = (w, ...rest) => {
      const type = typeof rest[0] === "string" ? rest[0] : rest[0]?.type;
      if (type !== "ExperimentalWarning" && w?.name !== "ExperimentalWarning") emit.call(process, w, ...rest);
    };
    try {
      return strip(code, { mode: "strip" });
    } finally {
      process.emitWarning = emit;
    }
  };
})();

function describe(err) {
  if (err instanceof Error || (err && typeof err === "object" && "stack" in err)) {
    const stack = String(err.stack ?? `${err.name}: ${err.message}`);
    // Frames of the driver are no concern of the cell.
    const lines = stack.split("\n").filter((l) => !l.includes("<astrabox-driver>") && !/\(node:vm:|at node:vm|node:internal/.test(l));
    return { type: "error", ename: String(err.name || "Error"), evalue: clip(String(err.message ?? "")), traceback: lines.map(clip) };
  }
  const text = clip(util.inspect(err));
  return { type: "error", ename: "Error", evalue: text, traceback: ["Uncaught " + text] };
}

const OUTPUTS = {};
function identity(fd) {
  const st = fs.fstatSync(fd, { bigint: true });
  return `${st.dev}:${st.ino}`;
}

async function run(req, n) {
  let err = null;
  let value;
  send({ type: "started", n });
  try {
    let code = req.code;
    if (LANGUAGE === "typescript") code = stripTypes(code);
    // Top-level declarations persist in the context from cell to cell, as
    // in a browser's scripts; the completion value is the result.
    value = vm.runInThisContext(code, { filename: `<cell-${n}>`, breakOnSigint: true });
    if (value && typeof value.then === "function") value = await value;
  } catch (e) {
    err = e;
  }
  if (err === null && value !== undefined) {
    globalThis._ = value;
    send({ type: "result", data: { "text/plain": clip(util.inspect(value)) } });
  }
  finish(req, err);
}

function finish(req, err) {
  if (err !== null) send(describe(err));
  const marker = Buffer.from(req.marker + "\n", "utf8");
  const marked = [];
  for (const fd of [1, 2]) {
    try {
      // A cell may have pointed the fd elsewhere: then execd would wait for
      // a marker in vain.
      if (identity(fd) !== OUTPUTS[fd]) continue;
      fs.writeSync(fd, marker);
      marked.push(fd);
    } catch {
      // not writable
    }
  }
  send({ type: "done", marked });
}

function main() {
  for (const fd of [1, 2]) OUTPUTS[fd] = identity(fd);
  // SIGINT (an interrupt from execd) ends a running cell (breakOnSigint);
  // between cells it is ignored.
  process.on("SIGINT", () => {});
  // An error thrown by a callback after its cell ended is reported on
  // stderr, and the context lives on.
  process.on("uncaughtException", (e) => {
    fs.writeSync(2, `Uncaught ${e?.stack ?? util.inspect(e)}\n`);
  });
  process.on("unhandledRejection", (e) => {
    fs.writeSync(2, `Uncaught (in promise) ${e?.stack ?? util.inspect(e)}\n`);
  });
  globalThis.require = require;
  if (LANGUAGE === "typescript" && stripTypes === null) {
    send({
      type: "ready",
      python: process.version,
      unsupported: `typescript code contexts need node 22.13 or later, which strips types from a cell (module.stripTypeScriptTypes); this box's node is ${process.version}`,
    });
    process.exit(3);
  }
  send({ type: "ready", python: process.version });
  const rl = readline.createInterface({ input: fs.createReadStream(null, { fd: REQUESTS_FD }), crlfDelay: Infinity });
  const queue = [];
  let busy = false;
  let n = 0;
  const next = async () => {
    if (busy) return;
    busy = true;
    while (queue.length > 0) {
      const req = queue.shift();
      n += 1;
      await run(req, n);
    }
    busy = false;
  };
  rl.on("line", (line) => {
    queue.push(JSON.parse(line));
    next();
  });
  rl.on("close", () => process.exit(0));
}

main();
