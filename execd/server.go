// Package execd is the in-box daemon: it runs commands, bash sessions, code
// contexts and terminals, serves files, and proxies ports, behind the HTTP
// API of the OpenSandbox execd specification plus AstraBox's additions.
//
// A Server is created with New and served through Handler; Close stops
// every process it started.
package execd

import (
	"crypto/subtle"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/astrabox/astrabox/execd/outlog"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// Config configures a Server. Zero values take the documented defaults.
type Config struct {
	// AccessToken, when set, must arrive in X-EXECD-ACCESS-TOKEN on every
	// request.
	AccessToken string
	// Env is the base environment of every process execd starts (the
	// caller passes os.Environ() or the box's environment).
	Env []string
	// WorkDir is the default working directory of commands ("" = execd's).
	WorkDir string
	// Shell runs commands with `-c` (default /bin/bash, else /bin/sh).
	Shell string
	// Python is the interpreter of python code contexts (default python3).
	Python string
	// Node is the interpreter of javascript and typescript code contexts
	// (default node).
	Node string
	// Java is the launcher of java code contexts, of a JDK with jshell
	// (default java).
	Java string
	// Go is the go command of go code contexts (default go, else the
	// standard install's /usr/local/go/bin/go).
	Go string
	// OutputLimit bounds the retained output of each stream of a command
	// (default 8 MiB; never more than the total, see OutputTotal).
	OutputLimit int64
	// OutputTotal bounds the output retained by all commands, session
	// runs and code cells together (default 128 MiB): past it, finished
	// ones lose their output first, oldest first (outlog.Budget); a
	// command's status reports the bytes it lost (output_dropped).
	// Retained output is charged to the box's memory, so New lowers the
	// total to 1/OutputMemoryShare of the box's memory limit (but not
	// below MinOutputTotal) where that is smaller; a smaller configured
	// total always wins.
	OutputTotal int64
	// MemoryLimit is the memory limit of the box execd serves, in bytes,
	// which sizes OutputTotal: 0 reads it from execd's own cgroup when New
	// runs (CgroupMemoryLimit), a negative value means none applies.
	MemoryLimit int64
	// Retention is how long a finished command's record and output are
	// kept (default 10 minutes).
	Retention time.Duration
	// MaxCommands bounds concurrently running commands (default 256).
	MaxCommands int
	// MaxUploadBytes bounds one uploaded file (default 0: no limit).
	MaxUploadBytes int64
	// MaxJSONBytes bounds a JSON request body (default 8 MiB).
	MaxJSONBytes int64
	// PTYReplayBytes bounds a PTY session's replay buffer (default 1 MiB).
	PTYReplayBytes int64
	// Logger receives operational logs (default slog.Default()).
	Logger *slog.Logger
	// Children, when set, is told of every process execd starts, so that
	// the process hosting execd can reap orphans as PID 1 of a box (see
	// ChildGuard). At most one Server per process may set it.
	Children *ChildGuard

	output *outlog.Budget // OutputTotal's, made by New
}

// newOutput returns the output log of a command, run or cell.
func (c *Config) newOutput() *outlog.Log { return outlog.NewIn(c.output, c.OutputLimit) }

func (c *Config) setDefaults() {
	if c.Shell == "" {
		c.Shell = defaultShell()
	}
	if c.Node == "" {
		c.Node = "node"
	}
	if c.Python == "" {
		c.Python = "python3"
	}
	if c.Java == "" {
		c.Java = "java"
	}
	if c.Go == "" {
		c.Go = "go"
	}
	if c.OutputLimit <= 0 {
		c.OutputLimit = 8 << 20
	}
	if c.OutputTotal <= 0 {
		c.OutputTotal = 128 << 20
	}
	if c.Retention <= 0 {
		c.Retention = 10 * time.Minute
	}
	if c.MaxCommands <= 0 {
		c.MaxCommands = 256
	}
	if c.MaxJSONBytes <= 0 {
		c.MaxJSONBytes = 8 << 20
	}
	if c.PTYReplayBytes <= 0 {
		c.PTYReplayBytes = 1 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.sizeOutput()
}

// sizeOutput fits OutputTotal and OutputLimit to the box's memory limit
// (MemoryLimit, or its own cgroup's), makes the budget, and logs the
// figures chosen.
func (c *Config) sizeOutput() {
	source := "config"
	if c.MemoryLimit == 0 {
		limit, ok, err := CgroupMemoryLimit("/")
		switch {
		case err != nil:
			c.Logger.Warn("execd: the box's memory limit is unknown; output retention is not sized from it", "err", err)
		case ok:
			c.MemoryLimit, source = limit, "cgroup"
		}
	}
	c.OutputTotal, c.OutputLimit = sizeOutput(c.OutputTotal, c.OutputLimit, c.MemoryLimit)
	c.output = outlog.NewBudget(c.OutputTotal)
	if c.MemoryLimit <= 0 {
		source = "none"
	}
	c.Logger.Info("execd: output retention", "total_bytes", c.OutputTotal, "per_stream_bytes", c.OutputLimit,
		"memory_limit_bytes", max(c.MemoryLimit, 0), "memory_limit_from", source)
}

// Server is the execd HTTP service and the owner of every process it runs.
type Server struct {
	cfg      Config
	log      *slog.Logger
	mux      *http.ServeMux
	commands *commandTable
	sessions *sessionTable
	contexts *contextTable
	ptys     *ptyTable
	metrics  *metricsSampler

	closeOnce sync.Once
}

// New returns a Server; it starts no process until asked to.
func New(cfg Config) *Server {
	cfg.setDefaults()
	if cfg.Children != nil {
		childGuard.Store(cfg.Children)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux()}
	s.commands = newCommandTable(&s.cfg, s.log)
	s.mux.HandleFunc("GET /ping", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	s.mux.HandleFunc("GET /status", s.handleStatus)
	s.registerCommands()
	s.registerSessions()
	s.registerCode()
	s.registerFiles()
	s.registerPTY()
	s.registerProxy()
	s.registerTunnel()
	s.registerMetrics()
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, sandbox.Errorf(sandbox.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path))
	})
	return s
}

// Handler returns the HTTP handler, with access-token checking when a token
// is configured.
func (s *Server) Handler() http.Handler {
	if s.cfg.AccessToken == "" {
		return s.mux
	}
	want := []byte(s.cfg.AccessToken)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get(wire.HeaderAccessToken))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			writeError(w, sandbox.Errorf(sandbox.CodeUnauthorized, "missing or invalid %s header", wire.HeaderAccessToken))
			return
		}
		s.mux.ServeHTTP(w, r)
	})
}

// Close kills every command, session, context and terminal and waits for
// them to exit. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		var wg sync.WaitGroup
		for _, closer := range []func(){s.commands.closeAll, s.closeSessions, s.closeContexts, s.closePTYs, s.closeMetrics} {
			wg.Add(1)
			go func() { defer wg.Done(); closer() }()
		}
		wg.Wait()
	})
	return nil
}
