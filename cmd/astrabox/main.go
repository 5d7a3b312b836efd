// Command astrabox is AstraBox: the server, the in-box daemon, the sandbox
// init and the CLI, in one static binary.
package main

import (
	"context"
	"os"

	"github.com/astrabox/astrabox/internal/app"
)

func main() {
	ctx, stop := app.SignalContext(context.Background())
	code := app.Main(ctx, os.Args[1:], app.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, app.OSEnv)
	stop()
	os.Exit(code)
}
