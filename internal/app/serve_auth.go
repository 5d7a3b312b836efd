package app

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/astrabox/astrabox/api/identityapi"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/identity/oidc"
)

// authConfig is the "auth" section of the config file: who may sign in
// and how long what they hold lasts. The bootstrap API key (--api-key,
// ASTRABOX_API_KEY or the generated one) always works; it belongs to the
// service user "admin".
type authConfig struct {
	// OIDC offers people sign-in through an OpenID Connect provider
	// (omitted: API keys only).
	OIDC *oidcConfig `json:"oidc"`
	// SessionTTL is how long a browser sign-in lasts, in seconds (default
	// 12 hours).
	SessionTTL int `json:"sessionTTL"`
	// MaxKeyLifetime bounds every API key made, in seconds (0: keys may
	// live forever); a key asked for without an expiry gets it.
	MaxKeyLifetime int `json:"maxKeyLifetime"`
	// Gateway takes identity from an authenticating gateway's headers
	// (omitted: none).
	Gateway *gatewayConfig `json:"gateway"`
}

// gatewayConfig is "auth.gateway" (see identityapi.Gateway): the header
// names, the shared secret (or ASTRABOX_GATEWAY_SECRET), and the groups'
// roles.
type gatewayConfig struct {
	SecretHeader string   `json:"secretHeader"`
	Secret       string   `json:"secret"`
	UserHeader   string   `json:"userHeader"`
	EmailHeader  string   `json:"emailHeader"`
	NameHeader   string   `json:"nameHeader"`
	GroupsHeader string   `json:"groupsHeader"`
	Issuer       string   `json:"issuer"`
	AdminGroups  []string `json:"adminGroups"`
	DefaultRole  string   `json:"defaultRole"`
}

// gateway returns the section's gateway (nil without auth.gateway), or an
// error when it has no secret.
func (c authConfig) gateway(env func(string) string) (*identityapi.Gateway, error) {
	g := c.Gateway
	if g == nil {
		return nil, nil
	}
	secret := cmp.Or(env("ASTRABOX_GATEWAY_SECRET"), g.Secret)
	if len(secret) < 16 {
		return nil, fmt.Errorf("auth.gateway needs a secret of at least 16 characters (auth.gateway.secret or ASTRABOX_GATEWAY_SECRET)")
	}
	return &identityapi.Gateway{SecretHeader: g.SecretHeader, Secret: secret, UserHeader: g.UserHeader,
		EmailHeader: g.EmailHeader, NameHeader: g.NameHeader, GroupsHeader: g.GroupsHeader, Issuer: g.Issuer,
		AdminGroups: g.AdminGroups, DefaultRole: identity.Role(cmp.Or(g.DefaultRole, "member"))}, nil
}

// oidcConfig is "auth.oidc": the provider, AstraBox's client there, and
// how the provider's groups map to roles.
type oidcConfig struct {
	Issuer   string `json:"issuer"`
	ClientID string `json:"clientId"`
	// ClientSecret may instead come from ASTRABOX_OIDC_CLIENT_SECRET,
	// which keeps it out of the file.
	ClientSecret string `json:"clientSecret"`
	// RedirectURL is registered with the provider (default
	// http://<publicHost>/api/v1/auth/callback; set it for https).
	RedirectURL string `json:"redirectUrl"`
	// Scopes besides openid (default email, profile, groups).
	Scopes []string `json:"scopes"`
	// GroupsClaim names the ID token's groups (default "groups").
	GroupsClaim string `json:"groupsClaim"`
	// AdminGroups make their members administrators at every sign-in.
	AdminGroups []string `json:"adminGroups"`
	// DefaultRole is everyone else's first role: member (default) or
	// viewer.
	DefaultRole string `json:"defaultRole"`
	// Name is the console's "Sign in with <Name>" (default: the issuer's
	// host).
	Name string `json:"name"`
}

// validate names the first key it refuses.
func (c authConfig) validate() error {
	if c.SessionTTL < 0 || c.MaxKeyLifetime < 0 {
		return fmt.Errorf("auth.sessionTTL and auth.maxKeyLifetime must be positive seconds (or 0 for the default)")
	}
	if g := c.Gateway; g != nil && g.DefaultRole != "" && !slices.Contains([]string{"member", "viewer"}, g.DefaultRole) {
		return fmt.Errorf("auth.gateway.defaultRole must be member or viewer, got %q", g.DefaultRole)
	}
	o := c.OIDC
	if o == nil {
		return nil
	}
	if u, err := url.Parse(o.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("auth.oidc.issuer must be the provider's http(s) issuer URL, got %q", o.Issuer)
	}
	if o.ClientID == "" {
		return fmt.Errorf("auth.oidc.clientId is required")
	}
	if o.RedirectURL != "" {
		if u, err := url.Parse(o.RedirectURL); err != nil || u.Host == "" || u.Path != "/api/v1/auth/callback" {
			return fmt.Errorf("auth.oidc.redirectUrl must be this server's URL with the path /api/v1/auth/callback, got %q", o.RedirectURL)
		}
	}
	if o.DefaultRole != "" && !slices.Contains([]string{"member", "viewer"}, o.DefaultRole) {
		return fmt.Errorf("auth.oidc.defaultRole must be member or viewer, got %q", o.DefaultRole)
	}
	return nil
}

// web returns the browser sign-in the section configures (nil without
// auth.oidc); publicHost is where browsers reach the server.
func (c authConfig) web(publicHost string, env func(string) string) (*identityapi.Web, error) {
	o := c.OIDC
	if o == nil {
		return nil, nil
	}
	redirect := cmp.Or(o.RedirectURL, "http://"+publicHost+"/api/v1/auth/callback")
	scopes := o.Scopes
	if scopes == nil {
		scopes = []string{"email", "profile", "groups"}
	}
	prov, err := oidc.New(oidc.Config{Issuer: o.Issuer, ClientID: o.ClientID,
		ClientSecret: cmp.Or(env("ASTRABOX_OIDC_CLIENT_SECRET"), o.ClientSecret),
		RedirectURL:  redirect, Scopes: scopes, GroupsClaim: o.GroupsClaim})
	if err != nil {
		return nil, fmt.Errorf("auth.oidc: %w", err)
	}
	u, _ := url.Parse(redirect)
	return &identityapi.Web{OIDC: prov, Name: o.Name, AdminGroups: o.AdminGroups,
		DefaultRole: identity.Role(cmp.Or(o.DefaultRole, "member")),
		SessionTTL:  time.Duration(c.SessionTTL) * time.Second, Secure: u.Scheme == "https"}, nil
}
