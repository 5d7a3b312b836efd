// Package oidc signs people in through an OpenID Connect provider
// (Keycloak, Dex, Google, Entra ID, Authentik, ...): the Authorization Code
// flow with PKCE, the ID token verified by the provider's discovery
// document and keys (issuer, audience, signature, expiry with a small
// leeway, nonce). It keeps no state: a flow's secrets (Flow) travel with
// the browser in a cookie the caller signs, and the caller turns the
// verified Identity into a user and a session.
//
// The OpenID Connect and OAuth 2 client libraries (coreos/go-oidc,
// x/oauth2) stay inside this package.
package oidc

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Config configures a Provider.
type Config struct {
	// Issuer is the provider's issuer URL; its discovery document is at
	// Issuer + "/.well-known/openid-configuration".
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is this server's callback, as registered with the
	// provider (…/api/v1/auth/callback).
	RedirectURL string
	// Scopes are asked for besides "openid" (default: email, profile).
	Scopes []string
	// GroupsClaim names the ID token claim that lists the person's groups
	// (default "groups").
	GroupsClaim string
	// Leeway tolerates clock skew when checking the ID token's expiry
	// (default 30 s).
	Leeway time.Duration
	// HTTPClient reaches the provider (default http.DefaultClient).
	HTTPClient *http.Client
}

// Provider is one configured OpenID Connect provider. Its discovery runs
// on first use and again after a failure, so a server may start before
// its provider. It is safe for concurrent use.
type Provider struct {
	cfg Config

	mu       sync.Mutex
	provider *gooidc.Provider
}

// New returns a Provider; it reaches the provider only when first used.
func New(cfg Config) (*Provider, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" || cfg.RedirectURL == "" {
		return nil, errors.New("oidc: issuer, client id and redirect URL are required")
	}
	if u, err := url.Parse(cfg.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("oidc: issuer %q is not an http(s) URL", cfg.Issuer)
	}
	if cfg.Scopes == nil {
		cfg.Scopes = []string{"email", "profile"}
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.Leeway <= 0 {
		cfg.Leeway = 30 * time.Second
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	return &Provider{cfg: cfg}, nil
}

// Issuer returns the configured issuer URL.
func (p *Provider) Issuer() string { return p.cfg.Issuer }

// discover returns the provider's discovery, reading it once it succeeds.
func (p *Provider) discover(ctx context.Context) (*gooidc.Provider, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.provider != nil {
		return p.provider, nil
	}
	prov, err := gooidc.NewProvider(gooidc.ClientContext(ctx, p.cfg.HTTPClient), p.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc: discover %s: %w", p.cfg.Issuer, err)
	}
	p.provider = prov
	return prov, nil
}

func (p *Provider) oauth(prov *gooidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, Endpoint: prov.Endpoint(),
		RedirectURL: p.cfg.RedirectURL, Scopes: append([]string{gooidc.ScopeOpenID}, p.cfg.Scopes...)}
}

// Flow is one sign-in in progress: what the callback needs to finish it.
// Its fields are secrets of the browser that started it; the caller keeps
// them in a signed, short-lived cookie.
type Flow struct {
	// ID names the flow (one flow makes at most one session).
	ID       string `json:"id"`
	State    string `json:"state"`
	Nonce    string `json:"nonce"`
	Verifier string `json:"verifier"`
	// Next is where the browser goes once signed in (a same-origin path,
	// checked by the caller).
	Next string `json:"next"`
}

// Start begins a sign-in: the provider's authorization URL to send the
// browser to, and the flow to keep until the callback.
func (p *Provider) Start(ctx context.Context, next string) (string, Flow, error) {
	prov, err := p.discover(ctx)
	if err != nil {
		return "", Flow{}, err
	}
	f := Flow{ID: random(), State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier(), Next: next}
	u := p.oauth(prov).AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier), gooidc.Nonce(f.Nonce))
	return u, f, nil
}

// Identity is who the provider says signed in.
type Identity struct {
	Issuer  string
	Subject string
	Email   string
	Name    string
	Groups  []string
}

// ErrFlow is returned by Finish for a callback that does not belong to its
// flow (another state), or that the provider refused.
var ErrFlow = errors.New("oidc: the sign-in does not match its flow")

// Finish completes flow f with the callback's state and code: it checks
// the state, exchanges the code (with the PKCE verifier) and verifies the
// ID token (signature by the provider's keys, issuer, audience = the
// client id, expiry with the leeway, the flow's nonce).
func (p *Provider) Finish(ctx context.Context, f Flow, state, code string) (Identity, error) {
	if state == "" || state != f.State || code == "" {
		return Identity{}, ErrFlow
	}
	prov, err := p.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	ctx = gooidc.ClientContext(ctx, p.cfg.HTTPClient)
	tok, err := p.oauth(prov).Exchange(ctx, code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return Identity{}, fmt.Errorf("%w: the code exchange failed: %w", ErrFlow, err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return Identity{}, fmt.Errorf("%w: the provider sent no ID token", ErrFlow)
	}
	return p.Verify(ctx, raw, f.Nonce)
}

// Verify checks a raw ID token as Finish does and returns its Identity.
func (p *Provider) Verify(ctx context.Context, raw, nonce string) (Identity, error) {
	prov, err := p.discover(ctx)
	if err != nil {
		return Identity{}, err
	}
	leeway := p.cfg.Leeway
	v := prov.Verifier(&gooidc.Config{ClientID: p.cfg.ClientID, Now: func() time.Time { return time.Now().Add(-leeway) }})
	idt, err := v.Verify(gooidc.ClientContext(ctx, p.cfg.HTTPClient), raw)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: the ID token is not valid: %w", ErrFlow, err)
	}
	if idt.Nonce != nonce {
		return Identity{}, fmt.Errorf("%w: the ID token's nonce is another flow's", ErrFlow)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("%w: the ID token's claims: %w", ErrFlow, err)
	}
	id := Identity{Issuer: idt.Issuer, Subject: idt.Subject}
	id.Email, _ = claims["email"].(string)
	id.Name, _ = claims["name"].(string)
	if id.Name == "" {
		id.Name, _ = claims["preferred_username"].(string)
	}
	switch g := claims[p.cfg.GroupsClaim].(type) {
	case []any:
		for _, v := range g {
			if s, ok := v.(string); ok {
				id.Groups = append(id.Groups, s)
			}
		}
	case string:
		id.Groups = []string{g}
	}
	return id, nil
}

// InGroup reports whether id is in one of groups.
func (id Identity) InGroup(groups []string) bool {
	for _, g := range id.Groups {
		if slices.Contains(groups, g) {
			return true
		}
	}
	return false
}

// random returns 32 random bytes in URL-safe base64.
func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
