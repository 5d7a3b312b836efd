package app

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/internal/server/servertest"
)

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// getThroughProxy GETs path of port of box id through the server's proxy
// until it answers 200 (the server in the box may still be starting), and
// returns the body; it fails the test after 30 s.
func getThroughProxy(t *testing.T, env *servertest.Env, id string, port int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/sandboxes/%s/proxy/%d/", env.URL, id, port), nil)
		req.Header.Set(api.HeaderAPIKey, servertest.Key)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return string(b)
			}
			err = fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the box's server on port %d: %v", port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestExecStartsAServer: a server started in a box the natural ways keeps
// serving after exec returns, request after request (each one a log line
// written to the output it inherited): with `sh -c 'server &'`, and with
// exec --background, which prints the command's id.
func TestExecStartsAServer(t *testing.T) {
	env := servertest.New(t, servertest.Options{})
	var sb struct {
		ID string `json:"id"`
	}
	env.Must(202, "POST", "/v1/sandboxes", map[string]any{"timeout": 600, "entrypoint": []string{"sleep", "infinity"}}, &sb)
	dir := t.TempDir()

	amp := freePort(t)
	r := runCLI(t, env, "", "exec", sb.ID, "--", "sh", "-c", fmt.Sprintf("cd %s && exec python3 -m http.server --bind 127.0.0.1 %d &", dir, amp))
	if r.code != 0 {
		t.Fatalf("exec: %d %s", r.code, r.stderr)
	}
	bg := freePort(t)
	r = runCLI(t, env, "", "exec", "--background", sb.ID, "--", "python3", "-m", "http.server", "--bind", "127.0.0.1", "--directory", dir, fmt.Sprint(bg))
	if r.code != 0 || !strings.HasPrefix(strings.TrimSpace(r.stdout), "cmd") {
		t.Fatalf("exec --background: %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	t.Cleanup(func() {
		runCLI(t, env, "", "exec", sb.ID, "--", "sh", "-c", fmt.Sprintf("pkill -f 'http.server --bind 127.0.0.1 %d'; pkill -f 'http.server --bind 127.0.0.1 --directory %s %d'; true", amp, dir, bg))
	})
	for i := 0; i < 5; i++ {
		for _, port := range []int{amp, bg} {
			if body := getThroughProxy(t, env, sb.ID, port); !strings.Contains(body, "Directory listing") {
				t.Fatalf("request %d to port %d: %q", i, port, body)
			}
		}
	}
}
