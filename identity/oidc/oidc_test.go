package oidc

import (
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/astrabox/astrabox/identity/oidc/oidctest"
)

// The redirect URIs the test clients register; nothing listens there:
// the test reads the code from the provider's redirect.
const (
	redirectA = "http://127.0.0.1:9/a/callback"
	redirectB = "http://127.0.0.1:9/b/callback"
	redirectS = "http://127.0.0.1:9/s/callback"
)

func newClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// signIn runs a whole flow of p as login and returns the flow, the
// callback's state and code.
func signIn(t *testing.T, idp *oidctest.IdP, p *Provider, login string) (Flow, string, string) {
	t.Helper()
	authURL, flow, err := p.Start(t.Context(), "/")
	if err != nil {
		t.Fatal(err)
	}
	resp := idp.Login(t, newClient(), authURL, login)
	resp.Body.Close()
	cb, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || cb.Query().Get("code") == "" {
		t.Fatalf("the provider's last redirect is %q, not a callback with a code", resp.Header.Get("Location"))
	}
	return flow, cb.Query().Get("state"), cb.Query().Get("code")
}

// rawIDToken exchanges a code for its ID token, as Finish does.
func rawIDToken(t *testing.T, p *Provider, flow Flow, code string) string {
	t.Helper()
	prov, err := p.discover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := p.oauth(prov).Exchange(t.Context(), code, oauth2.VerifierOption(flow.Verifier))
	if err != nil {
		t.Fatal(err)
	}
	return tok.Extra("id_token").(string)
}

func TestAgainstARealProvider(t *testing.T) {
	idp := oidctest.Start(t,
		oidctest.Client{ClientID: "astrabox", ClientSecret: "secret-a", RedirectURIs: []string{redirectA}},
		oidctest.Client{ClientID: "other-app", ClientSecret: "secret-b", RedirectURIs: []string{redirectB}},
		oidctest.Client{ClientID: "astrabox-short", ClientSecret: "secret-s", RedirectURIs: []string{redirectS}})
	mk := func(id, secret, redirect string, leeway time.Duration) *Provider {
		p, err := New(Config{Issuer: idp.Issuer, ClientID: id, ClientSecret: secret, RedirectURL: redirect,
			Scopes: []string{"email", "profile", "groups"}, Leeway: leeway})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := mk("astrabox", "secret-a", redirectA, 0)

	t.Run("sign in", func(t *testing.T) {
		flow, state, code := signIn(t, idp, p, "admin-ann")
		id, err := p.Finish(t.Context(), flow, state, code)
		if err != nil {
			t.Fatal(err)
		}
		if id.Issuer != idp.Issuer || id.Subject != "admin-ann" || id.Email != "admin-ann@example.com" ||
			id.Name != "Test admin-ann" || !id.InGroup([]string{oidctest.AdminGroup}) {
			t.Errorf("identity = %+v", id)
		}
		// The code is spent: the same callback again is refused.
		if _, err := p.Finish(t.Context(), flow, state, code); !errors.Is(err, ErrFlow) {
			t.Errorf("a replayed code: %v, want ErrFlow", err)
		}
	})
	t.Run("another flow's state", func(t *testing.T) {
		flow, _, code := signIn(t, idp, p, "bob")
		if _, err := p.Finish(t.Context(), flow, "forged-state", code); !errors.Is(err, ErrFlow) {
			t.Errorf("forged state: %v, want ErrFlow", err)
		}
	})
	t.Run("another flow's verifier", func(t *testing.T) {
		flow, state, code := signIn(t, idp, p, "bob")
		flow.Verifier = oauth2.GenerateVerifier()
		if _, err := p.Finish(t.Context(), flow, state, code); !errors.Is(err, ErrFlow) {
			t.Errorf("another verifier (PKCE): %v, want ErrFlow", err)
		}
	})
	t.Run("a token of another audience", func(t *testing.T) {
		other := mk("other-app", "secret-b", redirectB, 0)
		flow, _, code := signIn(t, idp, other, "mallory")
		raw := rawIDToken(t, other, flow, code)
		if _, err := other.Verify(t.Context(), raw, flow.Nonce); err != nil {
			t.Fatalf("the token is valid for its own client: %v", err)
		}
		if _, err := p.Verify(t.Context(), raw, flow.Nonce); !errors.Is(err, ErrFlow) {
			t.Errorf("a token for other-app accepted by astrabox: %v", err)
		}
	})
	t.Run("another nonce", func(t *testing.T) {
		flow, _, code := signIn(t, idp, p, "bob")
		raw := rawIDToken(t, p, flow, code)
		if _, err := p.Verify(t.Context(), raw, "another-flows-nonce"); !errors.Is(err, ErrFlow) {
			t.Errorf("another nonce: %v, want ErrFlow", err)
		}
	})
	t.Run("an expired token", func(t *testing.T) {
		short := mk("astrabox-short", "secret-s", redirectS, time.Millisecond)
		flow, _, code := signIn(t, idp, short, "bob")
		raw := rawIDToken(t, short, flow, code)
		time.Sleep(2 * time.Second) // the token lives a second
		if _, err := short.Verify(t.Context(), raw, flow.Nonce); !errors.Is(err, ErrFlow) {
			t.Errorf("an expired token: %v, want ErrFlow", err)
		}
	})
	t.Run("a forged signature", func(t *testing.T) {
		flow, _, code := signIn(t, idp, p, "bob")
		raw := rawIDToken(t, p, flow, code)
		forged := raw[:len(raw)-4] + map[bool]string{true: "AAAA", false: "BBBB"}[raw[len(raw)-4:] != "AAAA"]
		if _, err := p.Verify(t.Context(), forged, flow.Nonce); !errors.Is(err, ErrFlow) {
			t.Errorf("a forged signature: %v, want ErrFlow", err)
		}
	})
}

func TestNewRefuses(t *testing.T) {
	for _, c := range []Config{
		{ClientID: "a", RedirectURL: "http://x/cb"},
		{Issuer: "ftp://idp", ClientID: "a", RedirectURL: "http://x/cb"},
		{Issuer: "https://idp", RedirectURL: "http://x/cb"},
		{Issuer: "https://idp", ClientID: "a"},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}
