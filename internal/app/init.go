package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/astrabox/astrabox/execd"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/provider/native"
)

type exitCode int

func (e exitCode) Error() string { return "exit status" }
func (e exitCode) ExitCode() int { return int(e) }

func runInit(_ context.Context, args []string, stdio IO, _ Env) error {
	if len(args) > 0 {
		return errors.New("init takes no arguments")
	}
	guard := execd.NewChildGuard()
	d := native.Daemon{
		Serve: func(ctx context.Context, l net.Listener, token string, env []string) error {
			return serveBoxExecd(ctx, l, token, env, guard, stdio.Stderr)
		},
		ReapOrphans: guard.ReapOrphans,
		Children:    guard.Children,
	}
	if code := native.RunInit(stdio.Stderr, d); code != 0 {
		return exitCode(code)
	}
	return nil
}

// serveBoxExecd serves execd inside a box on the host's socket l and on TCP
// port 44772 until ctx ends, then stops every process it started.
func serveBoxExecd(ctx context.Context, l net.Listener, token string, env []string, guard *execd.ChildGuard, logw io.Writer) error {
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := execd.New(execd.Config{AccessToken: token, Env: env, WorkDir: "/workspace", Children: guard, Logger: log})
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	listeners := []net.Listener{l}
	if tl, err := net.Listen("tcp", fmt.Sprintf(":%d", wire.DefaultPort)); err == nil {
		listeners = append(listeners, tl)
	} else {
		log.Warn("execd: no TCP listener", "err", err)
	}
	errc := make(chan error, len(listeners))
	var wg sync.WaitGroup
	for _, ln := range listeners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	srv.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutdownCtx)
	wg.Wait()
	return err
}
