package shipyard_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/internal/testenv"
)

// newEnv starts a server on the native backend with the Debian test image
// (bash, coreutils, python3) as profile python-default. It needs root and
// ASTRABOX_TEST_ROOTFS (required in CI).
func newEnv(t *testing.T) (*servertest.Env, *bay) {
	t.Helper()
	testenv.NeedRoot(t)
	rootfs := os.Getenv("ASTRABOX_TEST_ROOTFS")
	testenv.Need(t, rootfs != "", "a Debian rootfs tarball (ASTRABOX_TEST_ROOTFS)")
	env := servertest.New(t, servertest.Options{Backend: "native", Rootfs: rootfs})
	return env, newBay(t, env.URL+"/shipyard", servertest.Key)
}

// usePythonDefault makes profile python-default the Env's image.
func usePythonDefault(env *servertest.Env) {
	env.Must(200, "PUT", "/v1/profiles/python-default", map[string]any{"image": env.Image}, nil)
}

// TestShipyard drives every route as AstrBot's shipyard_neo booter does:
// auth, profiles, create and the readiness poll, shell and python execs,
// files and their path rules, history, errors, idempotency, stop, restart
// and delete.
func TestShipyard(t *testing.T) {
	env, c := newEnv(t)

	t.Run("auth", func(t *testing.T) {
		anon := newBay(t, c.base, "")
		if r := anon.do("GET", "/health", nil); r.Status != 200 {
			t.Fatalf("GET /health without auth = %d %s", r.Status, r.Body)
		}
		for _, cl := range []*bay{anon, newBay(t, c.base, "wrong")} {
			r := cl.do("GET", "/v1/profiles", nil)
			if e := r.Err(t); r.Status != 401 || e["code"] != "unauthorized" || e["request_id"] == "" {
				t.Fatalf("GET /v1/profiles with token %q = %d %s", cl.token, r.Status, r.Body)
			}
		}
		// The OpenSandbox routes keep their own header; the bearer token
		// is for the facade only.
		req, _ := http.NewRequest("GET", env.URL+"/v1/sandboxes", nil)
		req.Header.Set("Authorization", "Bearer "+servertest.Key)
		if r := c.send(req); r.Status != 401 {
			t.Fatalf("OpenSandbox route with a bearer token = %d", r.Status)
		}
	})

	t.Run("profiles", func(t *testing.T) {
		items := c.must(200, "GET", "/v1/profiles", nil)["items"].([]any)
		p := items[0].(map[string]any)
		if p["id"] != "python-default" {
			t.Fatalf("first profile %v, want python-default out of the box", p)
		}
		for _, k := range []string{"id", "image", "resources", "capabilities", "idle_timeout"} {
			if _, ok := p[k]; !ok {
				t.Fatalf("profile %v lacks %q", p, k)
			}
		}
		usePythonDefault(env)
		items = c.must(200, "GET", "/v1/profiles", nil)["items"].([]any)
		if p := items[0].(map[string]any); p["id"] != "python-default" || p["image"] != env.Image {
			t.Fatalf("python-default after PUT = %v, want image %s", p, env.Image)
		}
	})

	sb := c.must(201, "POST", "/v1/sandboxes", map[string]any{"profile": "python-default", "ttl": 600})
	sandboxFields(t, sb)
	if sb["expires_at"] == nil || sb["idle_expires_at"] != nil {
		t.Fatalf("created %v: want an expiry and a null idle expiry", sb)
	}
	id := sb["id"].(string)
	c.waitReady(id)
	base := "/v1/sandboxes/" + id

	t.Run("shell", func(t *testing.T) {
		r := c.shell(id, "echo out; echo err >&2; pwd")
		if r["success"] != true || r["output"] != "out\n/workspace\n" || r["error"] != "err\n" || r["exit_code"] != 0.0 ||
			r["execution_id"] == "" || r["execution_time_ms"] == nil {
			t.Fatalf("shell = %v", r)
		}
		if r := c.shell(id, "exit 1"); r["success"] != false || r["exit_code"] != 1.0 {
			t.Fatalf("exit 1 = %v, want data with exit code 1", r)
		}
		c.shell(id, "mkdir -p sub/dir")
		if r := c.shell(id, "pwd", "cwd", "sub/dir"); r["output"] != "/workspace/sub/dir\n" {
			t.Fatalf("cwd sub/dir: %v", r)
		}
		if r := c.shell(id, "pwd", "cwd", "/workspace/sub"); r["output"] != "/workspace/sub\n" {
			t.Fatalf("cwd /workspace/sub: %v", r)
		}
		rr := c.do("POST", base+"/shell/exec", map[string]any{"command": "pwd", "cwd": "../.."})
		if e := rr.Err(t); rr.Status != 400 || e["code"] != "invalid_path" {
			t.Fatalf("cwd ../.. = %d %s", rr.Status, rr.Body)
		}
		start := time.Now()
		if r := c.shell(id, "sleep 30", "timeout", 1); r["success"] != false || !strings.Contains(fmt.Sprint(r["error"]), "timed out") {
			t.Fatalf("timeout = %v", r)
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("a 1 s timeout took %s", time.Since(start))
		}
		// AstrBot's background mode: a detached process outlives its exec.
		pid := strings.TrimSpace(c.shell(id, "nohup sleep 60 >/dev/null 2>&1 & echo $!")["output"].(string))
		if r := c.shell(id, "kill -0 "+pid+" && echo alive"); r["output"] != "alive\n" {
			t.Fatalf("background process %s after its exec: %v", pid, r)
		}
	})

	t.Run("files", func(t *testing.T) {
		c.must(200, "PUT", base+"/filesystem/files", map[string]any{"path": "workspace/a/b.txt", "content": "héllo"})
		for _, p := range []string{"a/b.txt", "workspace/a/b.txt", "/workspace/a/b.txt", "./a/../a/b.txt"} {
			if got := c.must(200, "GET", q(base+"/filesystem/files", "path", p), nil)["content"]; got != "héllo" {
				t.Fatalf("read %q = %v", p, got)
			}
		}
		if r := c.shell(id, "cat /workspace/a/b.txt"); r["output"] != "héllo" {
			t.Fatalf("the file in the box: %v", r)
		}
		for _, p := range []string{"../etc/passwd", "/etc/passwd", "a/../../x", "workspace/../../x", "/workspace/../etc"} {
			r := c.do("GET", q(base+"/filesystem/files", "path", p), nil)
			if e := r.Err(t); r.Status != 400 || e["code"] != "invalid_path" {
				t.Fatalf("read %q = %d %s, want 400 invalid_path", p, r.Status, r.Body)
			}
		}
		r := c.do("GET", q(base+"/filesystem/files", "path", "missing.txt"), nil)
		if e := r.Err(t); r.Status != 404 || e["code"] != "file_not_found" {
			t.Fatalf("read missing = %d %s", r.Status, r.Body)
		}
		name := "数据/文件 ü.txt"
		c.must(200, "PUT", base+"/filesystem/files", map[string]any{"path": name, "content": "中文"})
		entries := c.must(200, "GET", q(base+"/filesystem/directories", "path", "数据"), nil)["entries"].([]any)
		if len(entries) != 1 {
			t.Fatalf("entries %v", entries)
		}
		e := entries[0].(map[string]any)
		if e["name"] != "文件 ü.txt" || e["path"] != name || e["is_dir"] != false || e["size"] != 6.0 {
			t.Fatalf("entry %v", e)
		}
		root := c.must(200, "GET", base+"/filesystem/directories", nil)["entries"].([]any)
		var dirs []string
		for _, x := range root {
			if x := x.(map[string]any); x["is_dir"] == true {
				dirs = append(dirs, x["name"].(string))
			}
		}
		if fmt.Sprint(dirs) != "[a sub 数据]" {
			t.Fatalf("directories of the workspace: %v", dirs)
		}
		raw := c.do("GET", q(base+"/filesystem/download", "path", name), nil)
		if raw.Status != 200 || string(raw.Body) != "中文" || raw.Header.Get("Content-Type") != "application/octet-stream" {
			t.Fatalf("download = %d %q %v", raw.Status, raw.Body, raw.Header)
		}
		c.must(200, "DELETE", q(base+"/filesystem/files", "path", "数据"), nil)
		if r := c.do("GET", q(base+"/filesystem/download", "path", name), nil); r.Status != 404 {
			t.Fatalf("download after delete = %d", r.Status)
		}
		if r := c.do("DELETE", q(base+"/filesystem/files", "path", "."), nil); r.Status != 400 {
			t.Fatalf("delete the workspace = %d", r.Status)
		}
	})

	t.Run("upload", func(t *testing.T) {
		// AstrBot's skill sync: mkdir -p skills, upload skills/skills.zip,
		// then python3 scripts run through the shell read it.
		c.shell(id, "mkdir -p skills")
		const size = 100 << 20
		sum := upload(t, c, base, "skills/skills.zip", size)
		r := c.shell(id, `python3 -c "import hashlib,os;print(hashlib.sha256(open('skills/skills.zip','rb').read()).hexdigest(), os.getcwd())"`, "timeout", 120)
		if r["output"] != sum+" /workspace\n" {
			t.Fatalf("uploaded file in the box: %v, want %s", r, sum)
		}
		raw := c.do("GET", q(base+"/filesystem/download", "path", "/workspace/skills/skills.zip"), nil)
		if got := sha256.Sum256(raw.Body); raw.Status != 200 || hex.EncodeToString(got[:]) != sum {
			t.Fatalf("download of the upload: %d, %d bytes", raw.Status, len(raw.Body))
		}
	})

	t.Run("python", func(t *testing.T) {
		r := c.python(id, "x = 41\nprint('hi')")
		if r["success"] != true || r["output"] != "hi\n" || r["error"] != nil {
			t.Fatalf("python = %v", r)
		}
		data := r["data"].(map[string]any)
		n1 := data["execution_count"].(float64)
		r = c.python(id, "x + 1")
		data = r["data"].(map[string]any)
		if out := data["output"].(map[string]any); r["output"] != "42\n" || out["text"] != "42\n" || data["execution_count"].(float64) != n1+1 {
			t.Fatalf("state kept, last expression shown: %v", r)
		}
		if r := c.python(id, "import os; os.getcwd()"); r["output"] != "'/workspace'\n" {
			t.Fatalf("cwd of python: %v", r)
		}
		r = c.python(id, "1/0")
		if r["success"] != false || !strings.Contains(fmt.Sprint(r["error"]), "ZeroDivisionError") {
			t.Fatalf("exception = %v", r)
		}
		// Display data, IPython style, from plain python (the image has no
		// matplotlib): a raw MIME bundle and an object with _repr_png_.
		r = c.python(id, pngCode+`
display({"image/png": base64.b64encode(PNG).decode()}, raw=True)
class Pic:
    def _repr_png_(self): return PNG
display(Pic())
"shown"`)
		images := r["data"].(map[string]any)["output"].(map[string]any)["images"].([]any)
		if r["success"] != true || len(images) != 2 || r["output"] != "'shown'\n" {
			t.Fatalf("display = %v", r)
		}
		for _, im := range images {
			b, err := base64.StdEncoding.DecodeString(im.(map[string]any)["image/png"].(string))
			if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
				t.Fatalf("image %v is not a PNG: %v", im, err)
			}
		}
		if r := c.python(id, "import importlib.util; importlib.util.find_spec('matplotlib') is not None"); r["output"] == "True\n" {
			r := c.python(id, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")
			if n := len(r["data"].(map[string]any)["output"].(map[string]any)["images"].([]any)); n != 1 || r["error"] != nil {
				t.Fatalf("matplotlib figure: %d images, %v", n, r)
			}
		} else {
			t.Log("the image has no matplotlib: figure capture is not exercised")
		}
		if r := c.python(id, "print('after', x)"); r["output"] != "after 41\n" {
			t.Fatalf("state after display: %v", r)
		}
		start := time.Now()
		if r := c.must(200, "POST", base+"/python/exec", map[string]any{"code": "import time\ntime.sleep(30)", "timeout": 1}); r["success"] != false ||
			!strings.Contains(fmt.Sprint(r["error"]), "Timeout") || time.Since(start) > 15*time.Second {
			t.Fatalf("python timeout = %v after %s", r, time.Since(start))
		}
		if r := c.python(id, "x"); r["output"] != "41\n" {
			t.Fatalf("state after an interrupted cell: %v", r)
		}
	})

	t.Run("concurrent python", func(t *testing.T) {
		var wg sync.WaitGroup
		results := make([]map[string]any, 3)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := c.do("POST", base+"/python/exec", map[string]any{"code": fmt.Sprintf("import time\ntime.sleep(0.5)\nprint(%d)", i)})
				if r.Status == 200 {
					results[i] = r.JSON(t)
				} else {
					t.Errorf("concurrent exec %d = %d %s", i, r.Status, r.Body)
				}
			}()
		}
		wg.Wait()
		seen := map[float64]bool{}
		for i, r := range results {
			if r == nil {
				continue
			}
			n := r["data"].(map[string]any)["execution_count"].(float64)
			if r["success"] != true || r["output"] != fmt.Sprintf("%d\n", i) || seen[n] {
				t.Fatalf("exec %d = %v", i, r)
			}
			seen[n] = true
		}
	})

	t.Run("history", func(t *testing.T) {
		h := c.must(200, "GET", base+"/history", nil)
		entries := h["entries"].([]any)
		if len(entries) < 10 || h["total"].(float64) != float64(len(entries)) {
			t.Fatalf("history: %d entries, total %v", len(entries), h["total"])
		}
		py := c.must(200, "GET", q(base+"/history", "exec_type", "python", "success_only", "true", "limit", "2", "offset", "1"), nil)
		for _, e := range py["entries"].([]any) {
			if e := e.(map[string]any); e["exec_type"] != "python" || e["success"] != true {
				t.Fatalf("filtered entry %v", e)
			}
		}
		if n := len(py["entries"].([]any)); n != 2 {
			t.Fatalf("limit 2 gave %d", n)
		}
		r := c.shell(id, "echo last")
		last := c.must(200, "GET", base+"/history/last", nil)
		if last["id"] != r["execution_id"] || last["code"] != "echo last" || last["output"] != "last\n" || last["exec_type"] != "shell" {
			t.Fatalf("last = %v, want %v", last, r["execution_id"])
		}
		eid := r["execution_id"].(string)
		got := c.must(200, "PATCH", base+"/history/"+eid, map[string]any{"description": "say last", "tags": "demo", "notes": nil})
		if got["description"] != "say last" || got["tags"] != "demo" || got["notes"] != nil {
			t.Fatalf("annotated %v", got)
		}
		if got := c.must(200, "GET", base+"/history/"+eid, nil); got["description"] != "say last" {
			t.Fatalf("get %v", got)
		}
		if r := c.do("GET", base+"/history/exe-missing", nil); r.Status != 404 || r.Err(t)["code"] != "not_found" {
			t.Fatalf("missing execution = %d %s", r.Status, r.Body)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			method, path string
			body         any
			status       int
			code         string
		}{
			{"GET", "/v1/sandboxes/nope", nil, 404, "not_found"},
			{"POST", "/v1/sandboxes/nope/shell/exec", map[string]any{"command": "true"}, 404, "not_found"},
			{"POST", "/v1/sandboxes", map[string]any{"profile": "no-such-profile"}, 400, "validation_error"},
			{"POST", "/v1/sandboxes", map[string]any{"ttl": "soon"}, 400, "validation_error"},
			{"POST", base + "/shell/exec", map[string]any{"command": ""}, 400, "validation_error"},
			{"POST", base + "/shell/exec", map[string]any{"command": "true", "timeout": 0}, 400, "validation_error"},
			{"POST", base + "/browser/exec", map[string]any{"cmd": "open about:blank"}, 400, "capability_not_supported"},
			{"POST", base + "/extend_ttl", map[string]any{"extend_by": 0}, 400, "validation_error"},
			{"GET", "/v1/nothing-here", nil, 404, "not_found"},
		} {
			r := c.do(tc.method, tc.path, tc.body)
			e := r.Err(t)
			if r.Status != tc.status || e["code"] != tc.code || e["request_id"] != r.Header.Get("X-Request-ID") {
				t.Errorf("%s %s = %d %s, want %d %s", tc.method, tc.path, r.Status, r.Body, tc.status, tc.code)
			}
			if tc.code == "capability_not_supported" {
				d := e["details"].(map[string]any)
				if d["capability"] != "browser" || fmt.Sprint(d["available"]) != "[python shell filesystem]" {
					t.Errorf("capability details %v", d)
				}
			}
		}
	})

	t.Run("extend and idempotency", func(t *testing.T) {
		before := c.must(200, "GET", base, nil)["expires_at"].(string)
		b, _ := time.Parse(time.RFC3339Nano, before)
		hdr := []string{"Idempotency-Key", "ext-1"}
		r1 := c.must(200, "POST", base+"/extend_ttl", map[string]any{"extend_by": 120}, hdr...)
		a, _ := time.Parse(time.RFC3339Nano, r1["expires_at"].(string))
		if a.Sub(b) != 120*time.Second {
			t.Fatalf("extend_by 120 moved the expiry by %s", a.Sub(b))
		}
		r2 := c.do("POST", base+"/extend_ttl", map[string]any{"extend_by": 120}, hdr...)
		if r2.Status != 200 || r2.JSON(t)["expires_at"] != r1["expires_at"] || r2.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replayed extend = %d %s", r2.Status, r2.Body)
		}
		if r := c.do("POST", base+"/extend_ttl", map[string]any{"extend_by": 60}, hdr...); r.Status != 409 || r.Err(t)["code"] != "conflict" {
			t.Fatalf("key reused with another body = %d %s", r.Status, r.Body)
		}
		forever := c.must(201, "POST", "/v1/sandboxes", map[string]any{"profile": "python-default"}, "Idempotency-Key", "create-1")
		again := c.must(201, "POST", "/v1/sandboxes", map[string]any{"profile": "python-default"}, "Idempotency-Key", "create-1")
		if forever["id"] != again["id"] || forever["expires_at"] != nil {
			t.Fatalf("idempotent create: %v then %v", forever, again)
		}
		fid := forever["id"].(string)
		if r := c.do("POST", "/v1/sandboxes/"+fid+"/extend_ttl", map[string]any{"extend_by": 60}); r.Status != 409 || r.Err(t)["code"] != "sandbox_ttl_infinite" {
			t.Fatalf("extend a sandbox without expiry = %d %s", r.Status, r.Body)
		}
		c.must(204, "DELETE", "/v1/sandboxes/"+fid, nil)
		list := c.must(200, "GET", "/v1/sandboxes", nil)["items"].([]any)
		if len(list) != 1 || list[0].(map[string]any)["id"] != id {
			t.Fatalf("list = %v", list)
		}
	})

	t.Run("stop and keepalive", func(t *testing.T) {
		c.must(200, "POST", base+"/keepalive", nil)
		if r := c.must(200, "POST", base+"/stop", nil); r["status"] != "stopped" {
			t.Fatalf("stop = %v", r)
		}
		c.must(200, "POST", base+"/stop", nil) // twice is fine
		if st := c.must(200, "GET", base, nil)["status"]; st != "idle" {
			t.Fatalf("status after stop = %v, want idle", st)
		}
		// The next exec starts it again; files are kept.
		if r := c.shell(id, "cat a/b.txt"); r["output"] != "héllo" {
			t.Fatalf("exec after stop: %v", r)
		}
		if st := c.must(200, "GET", base, nil)["status"]; st != "ready" {
			t.Fatalf("status after the exec = %v", st)
		}
	})

	t.Run("restart", func(t *testing.T) {
		c.python(id, "kept = 'across restarts'")
		n := c.must(200, "GET", base+"/history", nil)["total"]
		env.Restart()
		c.base = env.URL + "/shipyard"
		c.waitReady(id)
		if got := c.must(200, "GET", base+"/history", nil)["total"]; got != n {
			t.Fatalf("history after restart: total %v, want %v", got, n)
		}
		if r := c.python(id, "kept"); r["output"] != "'across restarts'\n" {
			t.Fatalf("python state after a server restart: %v", r)
		}
	})

	c.must(204, "DELETE", base, nil)
	if r := c.do("GET", base, nil); r.Status != 404 || r.Err(t)["code"] != "not_found" {
		t.Fatalf("GET after delete = %d %s", r.Status, r.Body)
	}
	if r := c.do("GET", base+"/history", nil); r.Status != 404 {
		t.Fatalf("history after delete = %d", r.Status)
	}
}

// pngCode defines PNG, a valid 1x1 PNG made with the standard library.
const pngCode = `import base64, struct, zlib
def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
PNG = (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
       + _chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + _chunk(b"IEND", b""))`

// upload sends size deterministic bytes as a multipart upload (the path
// part first, as httpx sends it) and returns their SHA-256.
func upload(t *testing.T, c *bay, base, path string, size int64) string {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	h := sha256.New()
	go func() {
		err := mw.WriteField("path", path)
		if err == nil {
			var fw io.Writer
			if fw, err = mw.CreateFormFile("file", "upload"); err == nil {
				_, err = io.CopyN(io.MultiWriter(fw, h), &pattern{}, size)
			}
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, _ := http.NewRequestWithContext(context.Background(), "POST", c.base+base+"/filesystem/upload", pr)
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	r := c.send(req)
	if r.Status != 200 {
		t.Fatalf("upload = %d %s", r.Status, r.Body)
	}
	if got := r.JSON(t); got["size"] != float64(size) || got["path"] != path {
		t.Fatalf("upload answer %v", got)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// pattern yields an endless, non-repeating-per-KiB byte stream.
type pattern struct{ n uint64 }

func (p *pattern) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte(p.n*2654435761>>13) ^ byte(p.n>>10)
		p.n++
	}
	return len(b), nil
}

// TestShipyardMatplotlib: a matplotlib figure a cell shows comes back as
// one PNG, as in IPython. It runs in the pi image, whose python3 has
// matplotlib (ASTRABOX_TEST_PI_ROOTFS, required in CI).
func TestShipyardMatplotlib(t *testing.T) {
	testenv.NeedRoot(t)
	rootfs := os.Getenv("ASTRABOX_TEST_PI_ROOTFS")
	testenv.Need(t, rootfs != "", "an image with python3 and matplotlib (ASTRABOX_TEST_PI_ROOTFS; make dist/pi-rootfs.tar.gz)")
	env := servertest.New(t, servertest.Options{Backend: "native", Rootfs: rootfs})
	c := newBay(t, env.URL+"/shipyard", servertest.Key)
	usePythonDefault(env)
	id := c.must(201, "POST", "/v1/sandboxes", map[string]any{"profile": "python-default", "ttl": 600})["id"].(string)
	c.waitReady(id)
	r := c.python(id, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.title('x')\nplt.show()\n'drawn'")
	images := r["data"].(map[string]any)["output"].(map[string]any)["images"].([]any)
	if r["success"] != true || len(images) != 1 || r["output"] != "'drawn'\n" {
		t.Fatalf("matplotlib figure: %d images, %v", len(images), r)
	}
	b, err := base64.StdEncoding.DecodeString(images[0].(map[string]any)["image/png"].(string))
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) || len(b) < 1000 {
		t.Fatalf("the figure is not a PNG of a plot: %d bytes, %v", len(b), err)
	}
	// A figure shown once is not shown again by the next cell.
	if r := c.python(id, "1+1"); len(r["data"].(map[string]any)["output"].(map[string]any)["images"].([]any)) != 0 {
		t.Fatalf("the next cell repeats the figure: %v", r)
	}
}
