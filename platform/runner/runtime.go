package runner

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// ModelListen is where the model path listens inside a box: a loopback
// address tunnelled to the server, so a box with network none reaches it.
// Boxes of a backend without network isolation (the test-only process
// harness) share the host's loopback, so theirs take a free port instead.
const ModelListen = "127.0.0.1:44780"

// runtime is a live program in a sandbox.
type runtime struct {
	box       *store.Sandbox
	ex        *execdclient.Client
	adapter   engine.Adapter
	serial    bool // the adapter's SerialInputs: one input at a time
	rec       record
	idle      time.Duration
	sent      map[string]bool // inputs written to the program's stdin
	events    chan batch
	ended     chan error
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	model     *modelProxy
	writeLock sync.Mutex
}

// record is the Session's re-attach record (store.Session.Runtime).
type record struct {
	CommandID string `json:"command_id"`
	// ModelListen is the box's model path address.
	ModelListen string `json:"model_listen"`
	Placeholder string `json:"placeholder"`
	StatePath   string `json:"state_path,omitempty"`
	EngineKind  string `json:"engine_kind"`
	// Secrets maps each vault secret's variable to the placeholder the box
	// holds (see delivery.go); nil for an Agent without vaults.
	Secrets map[string]string `json:"secrets,omitempty"`
}

// batch is what the reader decoded from one output event: the events of
// the complete lines and the output offset just after the last of them (0
// when the event completed no line).
type batch struct {
	events []engine.Event
	source int64
}

// execd returns an execd client for a sandbox through its backend.
func (r *runner) execd(ctx context.Context, box *store.Sandbox) (*execdclient.Client, error) {
	svc := r.m.cfg.Sandboxes
	tok, err := svc.AccessToken(ctx, box)
	if err != nil {
		return nil, err
	}
	return execdclient.New("http://execd", execdclient.WithToken(tok),
		execdclient.WithDialer(func(ctx context.Context) (net.Conn, error) { return svc.Dial(ctx, box) })), nil
}

// resolve reads the Session's current Agent, profile and adapter.
func (r *runner) resolve(ctx context.Context, sess *store.Session) (*store.Agent, lifecycle.Profile, engine.Adapter, error) {
	a, err := r.m.cfg.Catalog.Agent(ctx, sess.AgentID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, lifecycle.Profile{}, nil, sandbox.Errorf(platform.CodeAgentNotFound, "agent %q no longer exists", sess.AgentID)
	}
	if err != nil {
		return nil, lifecycle.Profile{}, nil, err
	}
	prof, err := r.m.cfg.Catalog.RuntimeProfile(ctx, a.RuntimeProfile)
	if err != nil {
		return nil, lifecycle.Profile{}, nil, err
	}
	ad, err := r.m.cfg.Catalog.Engine(a.EngineKind)
	if err != nil {
		return nil, lifecycle.Profile{}, nil, sandbox.Errorf(platform.CodeEngineNotInstalled, "engine kind %q is not installed", a.EngineKind)
	}
	return a, prof, ad, nil
}

// build creates (or claims from a warm pool) a sandbox, writes back the
// native state, and starts the program.
func (r *runner) build(ctx context.Context, sess *store.Session) error {
	a, prof, ad, err := r.resolve(ctx, sess)
	if err != nil {
		return err
	}
	if err := r.setState(ctx, platform.StateCreating, "building runtime", nil); err != nil {
		return err
	}
	noIdle := time.Duration(0)
	// The box is the Session's owner's, as the Session is: it shows in
	// their sandbox list and its routes answer them.
	req := lifecycle.CreateRequest{Profile: prof.Name, IdleTimeout: &noIdle,
		Metadata: map[string]string{"astrabox.session": sess.ID, "astrabox.agent": a.ID},
		Owner:    lifecycle.Owner{UserID: sess.OwnerID, OrgID: sess.OrgID}}
	var deliv *delivery
	if len(a.VaultIDs) > 0 {
		req.Backend = prof.Backend
		if req.Backend == "" {
			req.Backend = r.m.cfg.Sandboxes.DefaultBackend()
		}
		if deliv, err = r.planDelivery(ctx, a, req.Backend, nil); err != nil {
			return err
		}
		np := deliveryPolicy(prof.Network, deliv.secrets)
		req.Env, req.Network = deliv.env(), &np
	}
	// The box is on the Session before the backend makes it: a holder that
	// stops from here on leaves a box the next one finds (halfBuilt).
	req.Recorded = func(b store.Sandbox) {
		if _, err := r.updateSession(ctx, func(s *store.Session) { s.SandboxID = b.ID }); err != nil {
			r.log.Warn("record the session's new sandbox", "sandbox_id", b.ID, "err", err)
		}
	}
	box, err := r.m.cfg.Sandboxes.Create(ctx, req)
	if err != nil {
		if box != nil { // recorded, then refused: its record goes
			r.deleteBox(box.ID, "runtime build failed")
		}
		return fmt.Errorf("create sandbox: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			r.deleteBox(box.ID, "runtime build failed")
		}
	}()
	ex, err := r.execd(ctx, box)
	if err != nil {
		return err
	}
	native, err := r.m.st.NativeState(ctx, sess.ID)
	if err != nil {
		return fmt.Errorf("read native state: %w", err)
	}
	r.nativeSize = int64(len(native))
	r.startLimits(prof)
	placeholder := newPlaceholder()
	rt := &runtime{box: box, ex: ex, adapter: ad, serial: ad.Descriptor().SerialInputs, idle: prof.IdleTimeout, sent: map[string]bool{},
		rec: record{Placeholder: placeholder, EngineKind: a.EngineKind, ModelListen: ModelListen}}
	if deliv != nil {
		if err := r.startDelivery(ctx, box, ex, deliv); err != nil {
			return err
		}
		rt.rec.Secrets = deliv.placeholders()
	}
	if p, ok := r.m.cfg.Sandboxes.Backends()[box.Backend]; ok && p.Capabilities().Isolation == sandbox.IsolationNone {
		rt.rec.ModelListen = ""
	}
	if err := r.startModel(ctx, rt, prof); err != nil {
		return err
	}
	launch, err := ad.Launch(engine.Config{SessionID: sess.ID, Model: a.Model, ModelBaseURL: "http://" + rt.rec.ModelListen + "/v1",
		ModelKey: placeholder, Instructions: a.Instructions, PermissionMode: a.PermissionMode, Tools: a.Tools,
		NativeKey: sess.NativeKey, Resume: len(native) > 0})
	if err != nil {
		rt.model.close()
		return fmt.Errorf("launch: %w", err)
	}
	rt.rec.StatePath = launch.StatePath
	files := launch.Files
	if len(native) > 0 && launch.StatePath != "" {
		files = append(files, engine.File{Path: launch.StatePath, Content: native, Mode: 0o600})
	}
	if err := writeFiles(ctx, ex, files); err != nil {
		rt.model.close()
		return err
	}
	env := map[string]string{}
	for k, v := range launch.Env {
		env[k] = v
	}
	ex2, err := ex.Run(ctx, wire.RunCommandRequest{Command: launch.Command, Cwd: launch.Cwd, Background: true, Stdin: true, PrivateStdio: true, Envs: env})
	if err != nil {
		rt.model.close()
		return fmt.Errorf("start program: %w", err)
	}
	rt.rec.CommandID = ex2.ID
	if len(launch.Stdin) > 0 {
		if err := ex.WriteStdin(ctx, ex2.ID, bytes.NewReader(launch.Stdin), false); err != nil {
			rt.model.close()
			return fmt.Errorf("start program: write its stdin: %w", err)
		}
	}
	recJSON, _ := json.Marshal(rt.rec)
	if _, err := r.updateSession(ctx, func(s *store.Session) {
		s.SandboxID, s.Runtime = box.ID, recJSON
	}); err != nil {
		rt.model.close()
		return err
	}
	ok = true
	r.rt = rt
	r.startReader(rt, 0)
	r.log.Info("runtime built", "sandbox_id", box.ID, "engine_kind", a.EngineKind, "resume", len(native) > 0)
	return nil
}

// deleteBox deletes a sandbox of the Session's, whatever became of the
// request that asked for it (a box already gone is not an error).
func (r *runner) deleteBox(id, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.m.cfg.Sandboxes.Delete(ctx, id, reason); err != nil && sandbox.CodeOf(err) != sandbox.CodeSandboxNotFound {
		r.log.Warn("delete the session's sandbox", "sandbox_id", id, "reason", reason, "err", err)
	}
}

// dropHalfBuilt deletes the box a build that did not finish recorded on
// the Session (its holder stopped between the box's record and the
// runtime's) and clears it from sess and the record: every box a Session
// asked for is either its runtime's or deleted.
func (r *runner) dropHalfBuilt(ctx context.Context, sess *store.Session) error {
	if err := r.confirmLease(ctx); err != nil {
		return err
	}
	id := sess.SandboxID
	r.log.Info("deleting the sandbox of a runtime build that did not finish", "sandbox_id", id)
	r.deleteBox(id, "runtime build interrupted")
	sess.SandboxID = ""
	_, err := r.updateSession(ctx, func(s *store.Session) {
		if s.SandboxID == id && len(s.Runtime) == 0 {
			s.SandboxID = ""
		}
	})
	return err
}

// attach re-connects to the program a previous holder started, reading its
// output from where the log ends.
func (r *runner) attach(ctx context.Context, sess *store.Session) error {
	var rec record
	if err := json.Unmarshal(sess.Runtime, &rec); err != nil || rec.CommandID == "" {
		return errors.New("no runtime record")
	}
	box, err := r.m.cfg.Sandboxes.Get(ctx, sess.SandboxID)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", sess.SandboxID, err)
	}
	if box.State != sandbox.StateRunning {
		return fmt.Errorf("sandbox %s is %s", box.ID, box.State)
	}
	ex, err := r.execd(ctx, box)
	if err != nil {
		return err
	}
	st, err := ex.Status(ctx, rec.CommandID)
	if err != nil {
		return fmt.Errorf("program status: %w", err)
	}
	if !st.Running {
		return errors.New("the program is no longer running")
	}
	a, prof, ad, err := r.resolve(ctx, sess)
	if err != nil {
		return err
	}
	if len(rec.Secrets) > 0 {
		if err := r.resumeDelivery(ctx, box, a, rec.Secrets); err != nil {
			return err
		}
	}
	native, err := r.m.st.NativeState(ctx, sess.ID)
	if err != nil {
		return fmt.Errorf("read native state: %w", err)
	}
	r.nativeSize = int64(len(native))
	r.startLimits(prof)
	offset, err := r.m.st.LastSource(ctx, sess.ID)
	if err != nil {
		return fmt.Errorf("read log position: %w", err)
	}
	if rec.ModelListen == "" {
		rec.ModelListen = ModelListen // a record from before the address was kept
	}
	rt := &runtime{box: box, ex: ex, adapter: ad, serial: ad.Descriptor().SerialInputs, idle: prof.IdleTimeout, sent: map[string]bool{}, rec: rec}
	// The program has the inputs it acknowledged: sending them again
	// would run them twice in a program that does not dedupe them.
	delivered, err := r.m.st.ListInputs(ctx, sess.ID, store.InputDelivered)
	if err != nil {
		return fmt.Errorf("list inputs: %w", err)
	}
	for _, in := range delivered {
		rt.sent[in.ID] = true
	}
	if err := r.startModel(ctx, rt, prof); err != nil {
		return err
	}
	r.rt = rt
	r.startReader(rt, offset)
	r.log.Info("runtime re-attached", "sandbox_id", box.ID, "offset", offset)
	return nil
}

// startReader follows the program's output from offset, decoding complete
// lines and sending them to the run goroutine.
func (r *runner) startReader(rt *runtime, offset int64) {
	ctx, cancel := context.WithCancel(r.ctx)
	rt.cancel = cancel
	rt.events = make(chan batch, 64)
	rt.ended = make(chan error, 1)
	dec := rt.adapter.NewDecoder()
	if rs, ok := dec.(engine.ReplyResumer); ok && offset > 0 && r.turn != nil {
		rs.ResumeReply(r.turn.order.OpenParts()) // re-attached mid-reply
	}
	rt.wg.Go(func() {
		var partial []byte
		err := rt.ex.FollowLogs(ctx, rt.rec.CommandID, offset, true, func(ev execdclient.Event) error {
			switch ev.Type {
			case wire.EventStdout:
			case wire.EventStderr:
				r.log.Debug("program stderr", "text", truncate(ev.Text, 500))
				return nil
			case wire.EventComplete:
				code := -1
				if ev.ExitCode != nil {
					code = *ev.ExitCode
				}
				return fmt.Errorf("program exited with code %d", code)
			default:
				return nil
			}
			end, _ := strconv.ParseInt(ev.ID, 10, 64)
			start := end - int64(len(ev.Text))
			data := []byte(ev.Text)
			var b batch
			pos := 0
			for {
				i := bytes.IndexByte(data[pos:], '\n')
				if i < 0 {
					break
				}
				line := data[pos : pos+i]
				if len(partial) > 0 {
					line = append(partial, line...)
					partial = nil
				}
				if len(bytes.TrimSpace(line)) > 0 {
					b.events = append(b.events, dec.Decode(line)...)
				}
				pos += i + 1
				if end > 0 {
					b.source = start + int64(pos)
				}
			}
			if pos < len(data) {
				partial = append(partial, data[pos:]...)
				if len(partial) > 8<<20 {
					return errors.New("program wrote a line over 8 MiB")
				}
			}
			if len(b.events) == 0 && b.source == 0 {
				return nil
			}
			select {
			case rt.events <- b:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("the program's output ended")
		}
		rt.ended <- err
	})
}

// closeRuntime stops reading and the model path; with releaseRT it also
// deletes the sandbox.
func (r *runner) closeRuntime() {
	rt := r.rt
	if rt == nil {
		return
	}
	r.rt = nil
	if rt.cancel != nil {
		rt.cancel()
	}
	rt.wg.Wait()
	if rt.model != nil {
		rt.model.close()
	}
	if r.mirrorLater != nil {
		r.mirrorLater.Stop()
		r.mirrorLater = nil
	}
	if r.releaseRT.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = r.m.cfg.Sandboxes.Delete(ctx, rt.box.ID, "session released")
	}
}

// writeStdin writes b to the program's stdin.
func (r *runner) writeStdin(ctx context.Context, b []byte) error {
	r.rt.writeLock.Lock()
	defer r.rt.writeLock.Unlock()
	return r.rt.ex.WriteStdin(ctx, r.rt.rec.CommandID, bytes.NewReader(b), false)
}

// deliver writes every pending input the program has not been sent in
// this runtime, in order; to a program that takes one at a time, the next
// only once nothing else is in its hands.
func (r *runner) deliver(ctx context.Context, pending []*store.Input) error {
	serial := r.rt.serial
	// A reply the runner ended may still be the program's: busy as with
	// one in progress.
	busy := r.turn != nil || r.abandoned != ""
	for _, in := range pending {
		if r.rt.sent[in.ID] {
			if serial {
				return nil // the program holds it
			}
			continue
		}
		if serial && busy {
			return nil
		}
		if r.full() {
			// The log is full: inputs are answered here, not run.
			if r.turn != nil {
				return nil // after the reply in progress
			}
			if err := r.failUnstarted(ctx, in, string(CodeSessionBytesExceeded), sessionFull(r.limits.SessionBytes).msg); err != nil {
				return err
			}
			continue
		}
		b, err := r.rt.adapter.EncodeInput(engine.Input{ID: in.ID, Content: in.Content, Busy: busy})
		if err != nil {
			return fmt.Errorf("encode input: %w", err)
		}
		if err := r.writeStdin(ctx, b); err != nil {
			r.log.Info("deliver input failed; the runtime will be checked", "input_id", in.ID, "err", err)
			return nil // the reader notices a lost runtime
		}
		r.rt.sent[in.ID] = true
		if serial {
			return nil
		}
	}
	return nil
}

func newPlaceholder() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return "abx-session-" + hex.EncodeToString(b[:])
}

// writeFiles writes the launch's files into the box, parents first.
func writeFiles(ctx context.Context, ex *execdclient.Client, files []engine.File) error {
	for _, f := range files {
		dir := f.Path[:bytes.LastIndexByte([]byte(f.Path), '/')]
		if dir != "" {
			if err := ex.MakeDirs(ctx, map[string]wire.Permission{dir: {Mode: 700}}); err != nil {
				return fmt.Errorf("create %s: %w", dir, err)
			}
		}
		mode := int(f.Mode)
		if mode == 0 {
			mode = 0o644
		}
		octal, _ := strconv.Atoi(strconv.FormatInt(int64(mode), 8))
		if err := ex.WriteFile(ctx, f.Path, f.Content, octal); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
