package app

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/signal"
)

// What a chat reads besides the Session: the lines of stdin and Ctrl-C.

// lineItem is a line of stdin, or its end.
type lineItem struct {
	text string
	eof  bool
}

// readLines sends stdin's lines, then its end, until done closes.
func readLines(r io.Reader, done <-chan struct{}) <-chan lineItem {
	out := make(chan lineItem)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case out <- lineItem{text: sc.Text()}:
			case <-done:
				return
			}
		}
		select {
		case out <- lineItem{eof: true}:
		case <-done:
		}
	}()
	return out
}

// interruptCause is the cause signal.NotifyContext gives a context that
// SIGINT ended (cmd/astrabox runs commands under one).
var interruptCause = os.Interrupt.String() + " signal received"

// watchInterrupts turns Ctrl-C presses into values on presses: the first
// is ctx ending by SIGINT, later ones are caught by a handler installed
// then. ctx ending for another reason (SIGTERM, a caller) closes quit.
// stop releases the watcher.
func watchInterrupts(ctx context.Context) (presses, quit <-chan struct{}, stop func()) {
	p, q := make(chan struct{}, 1), make(chan struct{})
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		if cause := context.Cause(ctx); cause == nil || cause.Error() != interruptCause {
			close(q)
			return
		}
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt)
		defer signal.Stop(sigs)
		for {
			select {
			case p <- struct{}{}:
			case <-done:
				return
			}
			select {
			case <-sigs:
			case <-done:
				return
			}
		}
	}()
	return p, q, func() {
		close(done)
		<-exited
	}
}
