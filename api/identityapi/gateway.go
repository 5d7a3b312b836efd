package identityapi

import (
	"crypto/subtle"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/astrabox/astrabox/identity"
)

// Gateway takes identity from an authenticating gateway (oauth2-proxy,
// Pomerium, an ingress with forward auth) in request headers. The
// gateway proves itself with a shared secret in SecretHeader; a request
// without that header is authenticated as usual (an API key, a session
// cookie), and one with a wrong secret is refused. Only the gateway must
// be able to reach the server, or a client could present the headers
// itself: the secret is what tells them apart.
type Gateway struct {
	// SecretHeader carries Secret (default "X-AstraBox-Gateway-Secret").
	SecretHeader string
	Secret       string
	// UserHeader names the person (required; default
	// "X-Forwarded-User"); EmailHeader, NameHeader and GroupsHeader (a
	// comma-separated list) are optional.
	UserHeader   string
	EmailHeader  string
	NameHeader   string
	GroupsHeader string
	// Issuer names the gateway in the users it creates (default
	// "gateway").
	Issuer string
	// AdminGroups make their members administrators; DefaultRole is
	// everyone else's first role (default member).
	AdminGroups []string
	DefaultRole identity.Role

	mu   sync.Mutex
	seen map[string]gatewaySeen
}

// gatewaySeen is a person recently signed in through the gateway.
type gatewaySeen struct {
	userID string
	at     time.Time
}

// gatewayRefresh is how often a person's record is refreshed from the
// gateway's headers (their role from the groups, their email and name).
const gatewayRefresh = 5 * time.Minute

// Present reports whether r claims to come from the gateway.
func (g *Gateway) Present(r *http.Request) bool {
	return g != nil && r.Header.Get(g.secretHeader()) != ""
}

func (g *Gateway) secretHeader() string {
	if g.SecretHeader != "" {
		return g.SecretHeader
	}
	return "X-AstraBox-Gateway-Secret"
}

// Authenticate returns the principal of a request Present reports as the
// gateway's: UNAUTHORIZED when the secret is wrong or no user is named.
// The person's user is created on first sight and refreshed every few
// minutes (SignIn).
func (g *Gateway) Authenticate(r *http.Request, acc *identity.Accounts, auth *identity.Authenticator) (*identity.Principal, error) {
	got := r.Header.Get(g.secretHeader())
	if g.Secret == "" || subtle.ConstantTimeCompare([]byte(got), []byte(g.Secret)) != 1 {
		return nil, identity.Unauthorized()
	}
	subject := strings.TrimSpace(r.Header.Get(or(g.UserHeader, "X-Forwarded-User")))
	if subject == "" || len(subject) > 256 {
		return nil, identity.Unauthorized()
	}
	var groups []string
	if g.GroupsHeader != "" {
		for _, s := range strings.Split(r.Header.Get(g.GroupsHeader), ",") {
			if s = strings.TrimSpace(s); s != "" {
				groups = append(groups, s)
			}
		}
	}
	admin := false
	for _, grp := range groups {
		for _, a := range g.AdminGroups {
			admin = admin || grp == a
		}
	}
	key := subject
	if admin {
		key += "\x00admin"
	}
	now := time.Now()
	g.mu.Lock()
	s, ok := g.seen[key]
	g.mu.Unlock()
	if !ok || now.Sub(s.at) > gatewayRefresh {
		role := g.DefaultRole
		if role == "" {
			role = identity.RoleMember
		}
		var hdr = func(name string) string {
			if name == "" {
				return ""
			}
			return r.Header.Get(name)
		}
		u, err := acc.SignIn(r.Context(), identity.External{Issuer: or(g.Issuer, "gateway"), Subject: subject,
			Email: hdr(g.EmailHeader), Name: hdr(g.NameHeader), Admin: admin}, role)
		if err != nil {
			return nil, err
		}
		acc.RecordSignIn(r.Context(), u.ID, "gateway")
		s = gatewaySeen{userID: u.ID, at: now}
		g.mu.Lock()
		if g.seen == nil || len(g.seen) > 10000 {
			g.seen = map[string]gatewaySeen{}
		}
		g.seen[key] = s
		g.mu.Unlock()
	}
	return auth.PrincipalOf(r.Context(), s.userID)
}

func or(s, def string) string {
	if s != "" {
		return s
	}
	return def
}
