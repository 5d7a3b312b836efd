package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Protected delivery. The box holds a placeholder for each secret (an
// environment variable); the proxy puts the real value in a request only
// when the request goes to the secret's destination: its host (exact, or
// "*.domain" for subdomains), under its path prefix, in its header. Over
// HTTPS the proxy terminates the box's TLS with a certificate of the
// server's CA (which only boxes with secrets, or with credential proxy
// bindings, trust) and opens its own, verified TLS connection upstream;
// over HTTP it rewrites the request on the way. Responses come back scrubbed of every
// value the box's proxy could deliver (scrub.go), protocol upgrades to
// such destinations are refused (an upgraded connection cannot be
// scrubbed), and nothing the proxy logs or answers carries a value. A path
// prefix holds on the path as forwarded, escaped (reqpath.go). Credential
// proxy bindings (binding.go) ride on the same relay.

// Secret is one credential the proxy delivers.
type Secret struct {
	Name        string // for logs
	Placeholder string // what the box holds (at least 16 bytes, unguessable)
	Value       string // the real value
	Host        string // "api.example.com" or "*.example.com"
	PathPrefix  string // "" or "/": every path; else whole segments of the forwarded path (see underPrefix)
	Header      string // default "Authorization"
	Format      string // default "Bearer {value}" for Authorization, else "{value}" (see Canonical)
}

// matchHost reports whether the secret may go to host (normalized).
func (s Secret) matchHost(host string) bool {
	want := strings.ToLower(strings.TrimSuffix(s.Host, "."))
	if rest, ok := strings.CutPrefix(want, "*."); ok {
		return len(host) > len(rest)+1 && strings.HasSuffix(host, "."+rest)
	}
	return host != "" && host == want
}

// Inject replaces, in req to host (a normalized name), each header that
// carries a matching secret's placeholder by the secret's formatted value;
// it returns the names of the secrets it delivered. A placeholder in any
// other header, in the body, or in a request to any other destination is
// left as it is. A secret's path prefix is matched against the path req
// is forwarded with, escaped as it goes upstream (see underPrefix): req's
// URL must not change after Inject.
func Inject(req *http.Request, host string, secrets []Secret) []string {
	var used []string
	path := forwardedPath(req)
	for _, s := range secrets {
		if s.Placeholder == "" || !s.matchHost(host) || !underPrefix(path, s.PathPrefix) {
			continue
		}
		c := s.Canonical()
		if !strings.Contains(req.Header.Get(c.Header), s.Placeholder) {
			continue
		}
		req.Header.Set(c.Header, strings.ReplaceAll(c.Format, "{value}", s.Value))
		used = append(used, s.Name)
	}
	return used
}

// SetSecrets replaces the secrets the proxy delivers for the box.
func (b *Box) SetSecrets(s []Secret) {
	cp := append([]Secret(nil), s...)
	b.secrets.Store(&cp)
}

func (b *Box) secretList() []Secret {
	if p := b.secrets.Load(); p != nil {
		return *p
	}
	return nil
}

func (b *Box) hasSecrets() bool { return len(b.secretList()) > 0 }

// scrubCache is the scrubber of one version of a box's secrets and
// bindings (each replaced, never changed in place, when it changes).
type scrubCache struct {
	secrets  *[]Secret
	bindings []Binding
	s        *scrubber
}

// scrubberFor returns the scrubber of the box's current secrets and
// bindings, built once for each version of them. A scrubber is only read
// once built: requests share it.
func (b *Box) scrubberFor() *scrubber {
	secrets, bindings := b.secrets.Load(), b.m.bindingsOf(b.id)
	if c := b.scrub.Load(); c != nil && c.secrets == secrets && len(c.bindings) == len(bindings) &&
		(len(bindings) == 0 || &c.bindings[0] == &bindings[0]) {
		return c.s
	}
	var list []Secret
	if secrets != nil {
		list = *secrets
	}
	s := newScrubber(list, bindings)
	b.scrub.Store(&scrubCache{secrets, bindings, s})
	return s
}

// intercepts reports whether the proxy terminates TLS to name on port:
// when the server has a CA and a secret may go to name, or a binding of
// scheme https names name and port.
func (b *Box) intercepts(name string, port int) bool {
	if b.m.cfg.CA == nil {
		return false
	}
	for _, s := range b.secretList() {
		if s.matchHost(name) {
			return true
		}
	}
	return b.bindingCovers("https", name, port)
}

// relaysHTTP reports whether the proxy reads the plain HTTP requests of a
// connection to name on port (rather than copying its bytes): when the box
// has secrets, or a binding of scheme http names name and port.
func (b *Box) relaysHTTP(name string, port int) bool {
	return b.hasSecrets() || b.bindingCovers("http", name, port)
}

// intercept terminates the box's TLS to ch.name and carries its HTTP/1
// requests to a verified TLS connection of the proxy's own.
func (b *Box) intercept(c net.Conn, s sniffed, ch choice) {
	cert, err := b.m.cfg.CA.Leaf(ch.name)
	if err != nil {
		b.log.Error("egress: certificate", "name", ch.name, "err", err)
		return
	}
	box := tls.Server(&replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(s.buf), c)}, &tls.Config{
		Certificates: []tls.Certificate{*cert},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	_ = box.SetDeadline(time.Now().Add(10 * time.Second))
	if err := box.Handshake(); err != nil {
		b.log.Info("egress: box TLS handshake", "name", ch.name, "err", err)
		return
	}
	_ = box.SetDeadline(time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), b.m.cfg.DialTimeout)
	raw, err := b.m.cfg.Dial(ctx, "tcp", ch.dst.String())
	if err != nil {
		cancel()
		b.refused("tcp", ch.name, ch.dst, "connect: "+err.Error())
		return
	}
	up := tls.Client(raw, b.m.tlsConfig(ch.name))
	err = up.HandshakeContext(ctx)
	cancel()
	if err != nil {
		raw.Close()
		b.refused("tls", ch.name, ch.dst, "upstream TLS: "+err.Error())
		return
	}
	defer up.Close()
	b.relayHTTP(bufio.NewReader(box), box, up, ch.name, "https", int(ch.dst.Port()))
}

// serveHTTP carries plain HTTP/1 requests of a box that has secrets or
// bindings for the connection's destination (see relaysHTTP), so that each
// request to a secret's host or a binding's destination gets it.
func (b *Box) serveHTTP(c net.Conn, s sniffed, ch choice) {
	ctx, cancel := context.WithTimeout(context.Background(), b.m.cfg.DialTimeout)
	up, err := b.m.cfg.Dial(ctx, "tcp", ch.dst.String())
	cancel()
	if err != nil {
		b.refused("tcp", s.name, ch.dst, "connect: "+err.Error())
		refusePage(c, s.head.req.Host, "the upstream cannot be reached")
		return
	}
	defer up.Close()
	b.relayHTTP(bufio.NewReader(io.MultiReader(bytes.NewReader(s.buf), c)), c, up, ch.name, "http", int(ch.dst.Port()))
}

// deliversTo reports whether a credential of the box may go over a
// connection of scheme to name on port: a secret's host matches name
// (whatever its path prefix), or a binding covers the connection. The
// upstream there may hold a credential, and echo it.
func (b *Box) deliversTo(scheme, name string, port int) bool {
	for _, s := range b.secretList() {
		if s.matchHost(name) {
			return true
		}
	}
	return b.bindingCovers(scheme, name, port)
}

// upgradeRequested reports whether req asks to switch protocols (an
// Upgrade header, or "upgrade" among its Connection options).
func upgradeRequested(req *http.Request) bool {
	return req.Header.Get("Upgrade") != "" || httpguts.HeaderValuesContainsToken(req.Header["Connection"], "upgrade")
}

// relayHTTP reads requests from the box (br over box), delivers secrets
// and applies credential proxy bindings in those whose Host is name (the
// name the connection was allowed and, for TLS, verified for; scheme and
// port are the connection's), writes them to up and copies each response
// back, scrubbed of credentials (scrub.go). Where a credential of the box
// goes (deliversTo), a request to switch protocols is refused with a 403
// that says why, and never sent (an upgraded connection cannot be
// scrubbed); elsewhere an upgrade (101) turns into a plain two-way copy.
// The secrets and bindings are read for each request, so a change applies
// to connections already open.
func (b *Box) relayHTTP(br *bufio.Reader, box net.Conn, up net.Conn, name, scheme string, port int) {
	upr := bufio.NewReader(up)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if upgradeRequested(req) && b.deliversTo(scheme, name, port) {
			b.log.Warn("egress: protocol upgrade refused where credentials are delivered", "name", name, "upgrade", req.Header.Get("Upgrade"))
			upgradeRefused(box, name)
			return
		}
		host, _, _ := hostName(req.Host)
		if host == name {
			if used := Inject(req, name, b.secretList()); len(used) > 0 {
				b.log.Info("egress delivered secrets", "name", name, "secrets", used)
			}
			switch binding, ambiguous := ApplyBindings(req, scheme, name, port, b.m.bindingsOf(b.id)); {
			case binding != "":
				b.log.Info("egress applied credential binding", "name", name, "binding", binding, "method", req.Method, "scheme", scheme)
			case ambiguous:
				b.log.Warn("egress: several credential bindings match; none applied", "name", name, "method", req.Method, "scheme", scheme)
			}
		}
		scrub := b.scrubberFor()
		if !scrub.empty() {
			// Bodies are scrubbed as they stream: only what the proxy
			// can read (scrub.go).
			req.Header.Set("Accept-Encoding", "identity")
		}
		if err := req.Write(up); err != nil {
			return
		}
		resp, err := http.ReadResponse(upr, req)
		if err != nil {
			return
		}
		if !scrub.empty() {
			err := scrub.scrubResponse(resp, func(headers, body int) {
				b.log.Warn("egress: the upstream echoed a credential in its response; withheld from the box",
					"name", name, "header_values", headers, "body_matches", body)
			})
			if err != nil {
				resp.Body.Close()
				b.log.Warn("egress: response withheld", "name", name, "err", err)
				badGateway(box, "AstraBox egress: "+err.Error())
				return
			}
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			if b.deliversTo(scheme, name, port) { // switched unasked
				resp.Body.Close()
				b.log.Warn("egress: the upstream switched protocols where credentials are delivered; connection closed", "name", name)
				badGateway(box, "AstraBox egress: the upstream switched protocols, and an upgraded connection cannot be scrubbed of the credentials delivered there")
				return
			}
			if err := resp.Write(box); err != nil {
				return
			}
			splice(&replayConn{Conn: box, r: br}, &replayConn{Conn: up, r: upr})
			return
		}
		err = resp.Write(box)
		resp.Body.Close()
		if err != nil || resp.Close || req.Close {
			return
		}
	}
}

// upgradeRefused answers a request to switch protocols on a connection to
// name where credentials are delivered, and ends the connection.
func upgradeRefused(c net.Conn, name string) {
	body := "AstraBox egress: protocol upgrades (WebSocket) to " + strconv.Quote(name) +
		" are refused: this sandbox's credentials are delivered there, and an upgraded connection cannot be scrubbed of them\n"
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}

// replayConn is a connection whose reads come from r (bytes already read
// off it, then the connection).
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite passes a half-close to the connection under it.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("no half-close")
}
