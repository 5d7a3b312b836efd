package api

import (
	"fmt"
	"io"
	"sync/atomic"
)

var apiErrors atomic.Int64

func writeCounter(w io.Writer, name, help string, v int64) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
}
