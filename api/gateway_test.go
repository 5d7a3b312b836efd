package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/astrabox/astrabox/api/identityapi"
	"github.com/astrabox/astrabox/internal/server"
)

// TestGatewayHeaders: behind an authenticating gateway, its headers name
// the person, but only with the gateway's secret.
func TestGatewayHeaders(t *testing.T) {
	e := newEnvConfig(t, 0, nil, func(c *server.Config) {
		c.Gateway = &identityapi.Gateway{Secret: "gw-secret", UserHeader: "X-Forwarded-User",
			EmailHeader: "X-Forwarded-Email", GroupsHeader: "X-Forwarded-Groups", AdminGroups: []string{"ops"}}
	})
	as := func(secret, user, groups string) (int, map[string]any) {
		req, _ := http.NewRequest("GET", e.srv.URL+"/api/v1/user/current", nil)
		if secret != "" {
			req.Header.Set("X-AstraBox-Gateway-Secret", secret)
		}
		req.Header.Set("X-Forwarded-User", user)
		req.Header.Set("X-Forwarded-Email", user+"@corp.example")
		req.Header.Set("X-Forwarded-Groups", groups)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out := map[string]any{}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	st, out := as("gw-secret", "dora", "staff")
	if st != 200 {
		t.Fatalf("through the gateway: %d %v", st, out)
	}
	u := out["user"].(map[string]any)
	if u["subject"] != "dora" || u["issuer"] != "gateway" || u["role"] != "member" || u["email"] != "dora@corp.example" {
		t.Errorf("gateway user = %v", u)
	}
	if _, out := as("gw-secret", "olga", "staff, ops"); out["user"].(map[string]any)["role"] != "admin" {
		t.Errorf("an ops member: %v", out)
	}
	for _, tc := range []struct{ name, secret, user string }{
		{"wrong secret", "gw-secreT", "dora"},
		{"no user", "gw-secret", ""},
		{"no secret: the headers are anyone's", "", "olga"},
	} {
		if st, out := as(tc.secret, tc.user, "ops"); st != 401 {
			t.Errorf("%s: %d %v, want 401", tc.name, st, out)
		}
	}
}
