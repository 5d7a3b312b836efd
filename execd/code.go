package execd

import (
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/astrabox/astrabox/execd/nodedriver"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// Code contexts (/code, /code/context, /code/contexts).
//
// A python context is one `python -u` process running the embedded driver
// (package pydriver): cells keep their state in its __main__, a trailing
// expression's repr is the result, an exception is an error event with a
// traceback, and SIGINT to its process group interrupts a running cell
// with KeyboardInterrupt. A javascript or typescript context is one `node`
// process running the driver of package nodedriver, which speaks the same
// protocol (state kept in its global context, the completion value as the
// result, SIGINT ends a running cell), and a java context one JDK `java`
// running the driver of package javadriver (JShell). A bash context is a
// bash session (session.go); a go context is a bash session that builds
// and runs each cell as a program (code_go.go). One cell runs at a time per context; another is refused
// with CONFLICT. A language whose interpreter the box lacks is refused
// with NOT_SUPPORTED, naming the languages the box offers.

// Supported context languages.
const (
	langPython     = "python"
	langBash       = "bash"
	langJavaScript = nodedriver.JavaScript
	langTypeScript = nodedriver.TypeScript
	langJava       = "java"
	langGo         = "go"
)

// allLanguages lists the supported languages, in the order errors name
// them.
var allLanguages = []string{langPython, langBash, langJavaScript, langTypeScript, langJava, langGo}

const (
	// driverStartTimeout bounds an interpreter's start, up to "ready".
	driverStartTimeout = 30 * time.Second
	// markerIdle bounds the wait for the output markers once the driver
	// reported a run done (they were written just before), counted from
	// the last output delivered: a marker the driver believed it wrote to
	// the pipe may still go astray (an fd shared with a process that
	// redirected it).
	markerIdle = 2 * time.Second
	// interruptWait bounds how long DELETE /code waits for the cell to
	// start and then to end.
	interruptWait = 10 * time.Second
	// interruptRepeat is how often DELETE /code repeats its SIGINT while
	// the cell runs on.
	interruptRepeat = time.Second
)

// normLanguage validates a language name; "" means python.
func normLanguage(s string) (string, error) {
	switch l := strings.ToLower(strings.TrimSpace(s)); l {
	case "", langPython, "python3":
		return langPython, nil
	case langBash, "sh", "shell":
		return langBash, nil
	case langJavaScript, "js", "node":
		return langJavaScript, nil
	case langTypeScript, "ts":
		return langTypeScript, nil
	case langJava:
		return langJava, nil
	case langGo, "golang":
		return langGo, nil
	default:
		return "", sandbox.Errorf(sandbox.CodeInvalidRequest, "language %q is not supported (supported: %s)", s, strings.Join(allLanguages, ", "))
	}
}

// offeredLanguages lists the languages whose interpreter the box has: bash
// always, python and javascript when their interpreters are on the box's
// PATH, typescript with javascript (node may still refuse it as too old),
// java with a JDK's java and go with the go command.
func offeredLanguages(cfg *Config) []string {
	out := []string{langBash}
	if _, err := lookPath(cfg.Python, cfg.Env); err == nil {
		out = append([]string{langPython}, out...)
	}
	if _, err := lookPath(cfg.Node, cfg.Env); err == nil {
		out = append(out, langJavaScript, langTypeScript)
	}
	if _, err := jdkLauncher(cfg); err == nil {
		out = append(out, langJava)
	}
	if _, err := goCommand(cfg); err == nil {
		out = append(out, langGo)
	}
	return out
}

// codeContext is one context: an interpreter running a driver (python,
// javascript, typescript, java) or a bash shell (bash, go).
type codeContext struct {
	id       string
	language string
	created  time.Time
	py       *interp // the driver's interpreter, for every language but bash and go
	sh       *shell
	gc       *goCells // a go context's state

	mu    sync.Mutex
	count int // bash execution count
}

func (cc *codeContext) wire() wire.CodeContext {
	return wire.CodeContext{ID: cc.id, Language: cc.language}
}

func (cc *codeContext) kill() {
	if cc.py != nil {
		cc.py.kill()
	} else {
		cc.sh.kill("context deleted")
	}
	if cc.gc != nil {
		cc.gc.remove()
	}
}

// contextTable owns the code contexts.
type contextTable struct {
	cfg    *Config
	log    *slog.Logger
	mu     sync.Mutex
	byID   map[string]*codeContext
	closed bool
}

// create starts a context of language (already normalised) in cwd.
// Errors: INVALID_PATH/FILE_NOT_FOUND for cwd, NOT_SUPPORTED without the
// language's interpreter, TOO_MANY_REQUESTS beyond MaxCommands contexts, UNAVAILABLE while
// shutting down, RUNTIME_ERROR when the interpreter fails to start.
func (t *contextTable) create(language, cwd string) (*codeContext, error) {
	dir, err := resolveDir(t.cfg.WorkDir, cwd)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	switch {
	case t.closed:
		t.mu.Unlock()
		return nil, sandbox.Errorf(sandbox.CodeUnavailable, "execd is shutting down")
	case len(t.byID) >= t.cfg.MaxCommands:
		t.mu.Unlock()
		return nil, sandbox.Errorf(sandbox.CodeTooManyRequests, "too many code contexts (limit %d); delete some first", t.cfg.MaxCommands)
	}
	t.mu.Unlock()
	cc := &codeContext{id: newID("ctx"), language: language, created: time.Now()}
	switch language {
	case langBash:
		cc.sh, err = startShell(t.cfg, t.log, cc.id, dir)
	case langGo:
		if cc.gc, err = newGoCells(t.cfg, cc.id); err == nil {
			if cc.sh, err = startShell(t.cfg, t.log, cc.id, dir); err != nil {
				cc.gc.remove()
			}
		}
	default:
		cc.py, err = startInterp(t.cfg, t.log, cc.id, dir, language)
	}
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		go cc.kill()
		return nil, sandbox.Errorf(sandbox.CodeUnavailable, "execd is shutting down")
	}
	t.byID[cc.id] = cc
	t.log.Debug("code context created", "context_id", cc.id, "language", language)
	return cc, nil
}

// get returns context id, or a CONTEXT_NOT_FOUND error.
func (t *contextTable) get(id string) (*codeContext, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cc, ok := t.byID[id]
	if !ok {
		return nil, sandbox.Errorf(sandbox.CodeContextNotFound, "context %q not found", id)
	}
	return cc, nil
}

// list returns the contexts of language ("" = all), oldest first.
func (t *contextTable) list(language string) []*codeContext {
	t.mu.Lock()
	out := make([]*codeContext, 0, len(t.byID))
	for _, cc := range t.byID {
		if language == "" || cc.language == language {
			out = append(out, cc)
		}
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].created.Before(out[j].created) })
	return out
}

// remove forgets context id and kills its process, or fails with
// CONTEXT_NOT_FOUND.
func (t *contextTable) remove(id string) error {
	t.mu.Lock()
	cc, ok := t.byID[id]
	delete(t.byID, id)
	t.mu.Unlock()
	if !ok {
		return sandbox.Errorf(sandbox.CodeContextNotFound, "context %q not found", id)
	}
	cc.kill()
	return nil
}

// removeAll kills the contexts of language ("" = all); with shutdown, new
// contexts are refused from then on.
func (t *contextTable) removeAll(language string, shutdown bool) {
	t.mu.Lock()
	t.closed = t.closed || shutdown
	var all []*codeContext
	for id, cc := range t.byID {
		if language == "" || cc.language == language {
			all = append(all, cc)
			delete(t.byID, id)
		}
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, cc := range all {
		wg.Add(1)
		go func() { defer wg.Done(); cc.kill() }()
	}
	wg.Wait()
}
