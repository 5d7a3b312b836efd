package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
)

// TestEndpointExpires checks both forms of `expires`: Unix epoch seconds,
// as the specification and the OpenSandbox SDKs' getSignedEndpoint send
// it, and a lifetime in seconds; the token it signs opens the proxy.
func TestEndpointExpires(t *testing.T) {
	e := newEnv(t, 0)
	ctx := ctxT(t)
	sb, err := e.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(600)}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	get := func(query string) (int, wire.Endpoint, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/sandboxes/%s/endpoints/44772?%s", e.srv.URL, sb.ID, query), nil)
		req.Header.Set(api.HeaderAPIKey, testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var ep wire.Endpoint
		_ = json.Unmarshal(b, &ep)
		return resp.StatusCode, ep, string(b)
	}

	epoch := time.Now().Add(2 * time.Hour).Unix()
	status, ep, body := get(fmt.Sprintf("expires=%d&use_server_proxy=false", epoch))
	if status != 200 || ep.ExpiresAt == nil || ep.ExpiresAt.Unix() != epoch {
		t.Fatalf("epoch expires: %d %s", status, body)
	}
	// The signed token alone opens execd through the proxy.
	req, _ := http.NewRequest("GET", "http://"+ep.Endpoint+"/ping", nil)
	for k, v := range ep.Headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ping with the signed token: %d", resp.StatusCode)
	}

	// As OpenSandbox's clients talk to execd: its own header alone.
	tok, ok := ep.Headers["X-EXECD-ACCESS-TOKEN"]
	if !ok {
		t.Fatalf("the execd endpoint names no X-EXECD-ACCESS-TOKEN header: %v", ep.Headers)
	}
	for _, c := range []struct {
		token string
		want  int
	}{{tok, 200}, {"9999999999.AAAA", 401}} {
		req, _ = http.NewRequest("GET", "http://"+ep.Endpoint+"/ping", nil)
		req.Header.Set("X-EXECD-ACCESS-TOKEN", c.token)
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Fatalf("ping with X-EXECD-ACCESS-TOKEN %q: %d, want %d", c.token, resp.StatusCode, c.want)
		}
	}

	before := time.Now()
	status, ep, body = get("expires=600")
	if status != 200 || ep.ExpiresAt == nil || ep.ExpiresAt.Before(before.Add(599*time.Second)) || ep.ExpiresAt.After(time.Now().Add(601*time.Second)) {
		t.Fatalf("lifetime expires: %d %s", status, body)
	}

	for _, q := range []string{
		fmt.Sprintf("expires=%d", time.Now().Add(-time.Minute).Unix()),
		fmt.Sprintf("expires=%d", time.Now().Add(8*24*time.Hour).Unix()),
		"expires=0",
		"expires=later",
	} {
		if status, _, body := get(q); status != 400 || !strings.Contains(body, "INVALID_REQUEST") {
			t.Errorf("%s: %d %s", q, status, body)
		}
	}
}

// TestProxyRequestBodiesUnderLoad sends many requests with bodies through
// the proxy at once, each answered with a stream execd starts before the
// proxy's transport has seen the end of the inbound body. None may be cut
// (golang/go#40747: the transport's read past the declared length used to
// fail on the body the server had closed, dropping the connection).
func TestProxyRequestBodiesUnderLoad(t *testing.T) {
	e := newEnv(t, 0)
	ctx := ctxT(t)
	sb, err := e.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(600)}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := e.c.Endpoint(ctx, sb.ID, 44772)
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 25
	errs := make(chan error, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				body := fmt.Sprintf(`{"command":"echo %d-%d"}`, w, i)
				req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+ep.Endpoint+"/command", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				for k, v := range ep.Headers {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case err != nil:
					errs <- fmt.Errorf("request %d-%d: body cut after %q: %v", w, i, b, err)
				case resp.StatusCode != 200 || !strings.Contains(string(b), fmt.Sprintf(`"text":"%d-%d"`, w, i)) || !strings.Contains(string(b), "execution_complete"):
					errs <- fmt.Errorf("request %d-%d: %d %q", w, i, resp.StatusCode, b)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 5 {
			t.Error(err)
		}
	}
	if n > 0 {
		t.Fatalf("%d of %d requests failed", n, workers*each)
	}
}
