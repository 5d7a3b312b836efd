package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	execdclient "github.com/astrabox/astrabox/execd/client"
	execdwire "github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/server"
)

// bodyTimeout is the short body read timeout of these tests' servers.
const bodyTimeout = 300 * time.Millisecond

func newDeadlineEnv(t *testing.T) *env {
	return newEnvConfig(t, 0, nil, func(c *server.Config) { c.HTTP.BodyReadTimeout = bodyTimeout })
}

// TestSlowBodyIsCutOff checks issue #12's slowloris item: a client that
// announces a body and then sends a byte every 100 ms is disconnected once
// the body read timeout has passed, on routes that read the body and on
// ones that refuse the request without reading it (no key).
func TestSlowBodyIsCutOff(t *testing.T) {
	e := newDeadlineEnv(t)
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	tests := []struct {
		name, method, path string
		key                bool
	}{
		{"create without a key", "POST", "/v1/sandboxes", false},
		{"create", "POST", "/v1/sandboxes", true},
		{"metadata patch", "PATCH", "/v1/sandboxes/nope/metadata", true},
		{"profile", "PUT", "/v1/profiles/slow", true},
		{"platform route without a key", "POST", "/api/v1/agents", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n", tc.method, tc.path)
			if tc.key {
				head += api.HeaderAPIKey + ": " + testKey + "\r\n"
			}
			if _, err := io.WriteString(c, head+"\r\n{"); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			go func() { // a byte every 100 ms, for as long as the server takes it
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if _, err := c.Write([]byte(" ")); err != nil {
							return
						}
					}
				}
			}()
			// Guard only: the server must close the connection long before.
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, err = io.Copy(io.Discard, c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the server kept the slow connection open")
			}
		})
	}
}

// TestStreamsOutliveTheBodyTimeout checks that what legitimately lasts
// longer than the body read timeout keeps working: a state event stream
// (SSE), a terminal WebSocket through the sandbox proxy, an upload through
// the proxy that trickles for longer than the timeout, and one larger than
// the JSON body limit.
func TestStreamsOutliveTheBodyTimeout(t *testing.T) {
	e := newDeadlineEnv(t)
	ctx := ctxT(t)
	sb, err := e.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(600)}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := e.c.Execd(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("terminal websocket", func(t *testing.T) {
		id, err := ex.CreatePTY(ctx, execdwire.CreatePTYRequest{})
		if err != nil {
			t.Fatal(err)
		}
		pc, err := ex.AttachPTY(ctx, id, execdclient.AttachOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		time.Sleep(3 * bodyTimeout) // past the body timeout: the socket must stay up
		if _, err := pc.Write([]byte("echo mk-$((40+2))\r")); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		for !strings.Contains(out.String(), "mk-42") {
			f, err := pc.Next(ctx)
			if err != nil {
				t.Fatalf("terminal after the body timeout: %v (output %q)", err, out.String())
			}
			out.Write(f.Data)
		}
	})

	t.Run("slow upload", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "slow.txt")
		pr, pw := io.Pipe()
		go func() {
			for i := range 4 { // four chunks over about four body timeouts
				fmt.Fprintf(pw, "chunk %d\n", i)
				time.Sleep(bodyTimeout)
			}
			pw.Close()
		}()
		if err := ex.Upload(ctx, path, pr, execdclient.UploadOptions{}); err != nil {
			t.Fatalf("slow upload through the proxy: %v", err)
		}
		got, err := ex.ReadFile(ctx, path)
		if err != nil || string(got) != "chunk 0\nchunk 1\nchunk 2\nchunk 3\n" {
			t.Fatalf("uploaded %q, %v", got, err)
		}
	})

	t.Run("large upload", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "large.bin")
		data := make([]byte, 8<<20) // beyond the 1 MiB JSON body limit
		_, _ = rand.Read(data)
		if err := ex.Upload(ctx, path, bytes.NewReader(data), execdclient.UploadOptions{}); err != nil {
			t.Fatalf("large upload through the proxy: %v", err)
		}
		got, err := ex.ReadFile(ctx, path)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("downloaded %d bytes, %v", len(got), err)
		}
	})

	t.Run("event stream", func(t *testing.T) {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		states := make(chan string, 16)
		go func() {
			_ = e.c.Events(sctx, sb.ID, 0, func(ev wire.StateEvent) error { states <- ev.State; return nil })
			close(states)
		}()
		time.Sleep(3 * bodyTimeout) // past the body timeout: the stream must stay up
		if err := e.c.Delete(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		for st := range states {
			if st == "Terminated" {
				return
			}
		}
		t.Fatal("the event stream ended before the sandbox's Terminated event")
	})
}
