package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/astrabox/astrabox/execd"
	"github.com/astrabox/astrabox/execd/wire"
)

func runExecd(ctx context.Context, args []string, stdio IO, env Env) error {
	fs := flag.NewFlagSet("execd", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	listen := fs.String("listen", fmt.Sprintf(":%d", wire.DefaultPort), "TCP address to listen on (empty: none)")
	unixPath := fs.String("unix", "", "also listen on this unix socket path")
	listenFD := fs.Int("listen-fd", 0, "also serve on this inherited listening socket (file descriptor number)")
	token := fs.String("access-token", "", "require this X-EXECD-ACCESS-TOKEN (default: $ASTRABOX_EXECD_TOKEN)")
	tokenFile := fs.String("access-token-file", "", "read the access token from this file")
	tokenFD := fs.Int("access-token-fd", 0, "read the access token from this inherited file descriptor (to EOF)")
	workdir := fs.String("workdir", "", "default working directory of commands")
	outputLimit := fs.Int64("output-limit", 8<<20, "bytes of output retained per stream of a command (at most the total)")
	outputTotal := fs.Int64("output-total", 128<<20, fmt.Sprintf("bytes of output retained by all commands together (oldest finished dropped first); "+
		"at most 1/%d of the box's memory limit, read from execd's cgroup at start, but not below %d MiB unless given smaller",
		execd.OutputMemoryShare, execd.MinOutputTotal>>20))
	retention := fs.Duration("retention", 10*time.Minute, "how long finished commands are kept")
	maxCommands := fs.Int("max-commands", 256, "concurrently running commands")
	maxUpload := fs.Int64("max-upload", 0, "largest uploaded file in bytes (0: no limit)")
	python := fs.String("python", "python3", "interpreter of python code contexts")
	node := fs.String("node", "node", "interpreter of javascript and typescript code contexts")
	java := fs.String("java", "java", "launcher of java code contexts (a JDK's, with jshell)")
	goCmd := fs.String("go", "go", "go command of go code contexts (default: go on PATH, else /usr/local/go/bin/go)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := newLogger(stdio.Stderr, *logLevel)
	if err != nil {
		return err
	}
	if *token == "" {
		*token = env("ASTRABOX_EXECD_TOKEN")
	}
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("read access token: %w", err)
		}
		*token = strings.TrimSpace(string(b))
	}
	if *tokenFD > 0 {
		f := os.NewFile(uintptr(*tokenFD), "token")
		b, err := io.ReadAll(io.LimitReader(f, 4096))
		f.Close()
		if err != nil {
			return fmt.Errorf("read access token: %w", err)
		}
		*token = strings.TrimSpace(string(b))
	}
	if *listen == "" && *unixPath == "" && *listenFD == 0 {
		return errors.New("nothing to listen on: give --listen, --unix or --listen-fd")
	}
	srv := execd.New(execd.Config{
		AccessToken:    *token,
		Env:            os.Environ(),
		WorkDir:        *workdir,
		Python:         *python,
		Node:           *node,
		Java:           *java,
		Go:             *goCmd,
		OutputLimit:    *outputLimit,
		OutputTotal:    *outputTotal,
		Retention:      *retention,
		MaxCommands:    *maxCommands,
		MaxUploadBytes: *maxUpload,
		Logger:         log,
	})
	defer srv.Close()

	var listeners []net.Listener
	if *listenFD > 0 {
		f := os.NewFile(uintptr(*listenFD), "listener")
		l, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("inherited listener: %w", err)
		}
		listeners = append(listeners, l)
	}
	if *unixPath != "" {
		_ = os.Remove(*unixPath)
		l, err := net.Listen("unix", *unixPath)
		if err != nil {
			return fmt.Errorf("listen on unix socket: %w", err)
		}
		if err := os.Chmod(*unixPath, 0o600); err != nil {
			l.Close()
			return fmt.Errorf("chmod unix socket: %w", err)
		}
		listeners = append(listeners, l)
	}
	if *listen != "" {
		l, err := net.Listen("tcp", *listen)
		if err != nil {
			closeListeners(listeners)
			return fmt.Errorf("listen: %w", err)
		}
		listeners = append(listeners, l)
	}
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, len(listeners))
	var wg sync.WaitGroup
	for _, l := range listeners {
		log.Info("execd listening", "addr", l.Addr().String(), "network", l.Addr().Network())
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// Stop the processes first so that streams of running commands end.
	srv.Close()
	_ = hs.Shutdown(shutdownCtx)
	wg.Wait()
	if *unixPath != "" {
		_ = os.Remove(*unixPath)
	}
	log.Info("execd stopped")
	return err
}

func closeListeners(ls []net.Listener) {
	for _, l := range ls {
		l.Close()
	}
}
