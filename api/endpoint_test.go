package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
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
