// Package nodedriver holds the JavaScript side of execd's javascript and
// typescript code contexts: a driver that turns a plain `node` into a
// notebook-like interpreter. It speaks the protocol of package pydriver
// (requests on fd 3, control messages on fd 4, the run's marker on fds 1
// and 2), so execd drives both the same way.
//
// Cells run with vm.runInThisContext in the driver's global context: var,
// let, const, function and class declarations persist from cell to cell
// (redeclaring a let or const is a SyntaxError, as across a page's
// scripts); the completion value (the last expression's value) is the
// result, awaited first when it is a promise; a thrown value is an error
// with the stack as traceback; SIGINT ends a running cell (breakOnSigint).
// `require` is available; top-level await is not (a cell can end with an
// async function's promise, which is awaited).
//
// TypeScript cells are stripped of their types by node itself
// (module.stripTypeScriptTypes, node 22.13+ and 23.2+), without a compiler
// in the box: --experimental-strip-types (22.6+) only applies to files node
// loads, not to code run in a live context. With an older node, the driver
// answers the handshake with a "ready" message whose Unsupported says why,
// and exits.
package nodedriver

import (
	_ "embed"
	"strconv"
)

//go:embed driver.js
var source []byte

// Languages the driver runs.
const (
	JavaScript = "javascript"
	TypeScript = "typescript"
)

// bootstrap reads the length-prefixed driver source from the request pipe
// (synchronously, before the event loop runs) and runs it, named
// <astrabox-driver> in stacks, with the pipe's descriptor, the language
// and require.
const bootstrap = `const fs=require('fs');const rd=(n)=>{const b=Buffer.alloc(n);let o=0;` +
	`while(o<n){const k=fs.readSync(3,b,o,n-o,null);if(k===0)process.exit(2);o+=k}return b};` +
	`let h='';for(;;){const c=rd(1).toString();if(c==='\n')break;h+=c}` +
	`const src=rd(parseInt(h,10)).toString('utf8');` +
	`require('vm').runInThisContext('(function(REQUESTS_FD,LANGUAGE,require){'+src+'\n})',` +
	`{filename:'<astrabox-driver>'})(3,process.argv[1],require)`

// Args returns the argv that starts the driver for language with node.
func Args(node, language string) []string {
	return []string{node, "-e", bootstrap, language}
}

// Preamble is the first thing to write to the request pipe.
func Preamble() []byte {
	return append([]byte(strconv.Itoa(len(source))+"\n"), source...)
}
