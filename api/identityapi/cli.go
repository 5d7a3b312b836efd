package identityapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/identity/wire"
)

// The CLI signs in through the browser (`astrabox login --browser`): it
// listens on a loopback port and opens GET /api/v1/auth/cli?port=P&state=S.
// A person not signed in goes through the provider first; a signed-in one
// sees what is asked and confirms with a form (a POST carrying a token
// bound to their session, so that no other page can confirm for them).
// The server then makes an API key of the person's for the CLI and hands
// it to the loopback port in a form the browser posts there: the key never
// appears in a URL or the browser's history.

// cliKeyLife is the life of a key made for the CLI (or the server's
// maximum, when shorter).
const cliKeyLife = 30 * 24 * time.Hour

// cliPage is the confirmation page and, once confirmed, the hand-over.
var cliPage = template.Must(template.New("cli").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>AstraBox: sign in the CLI</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:34rem;margin:4rem auto;padding:0 1rem;color:#1d2330}
button{font:inherit;padding:.5rem 1.2rem;border-radius:6px;border:0;background:#2d5be3;color:#fff;cursor:pointer}
code{background:#eef1f6;padding:.1rem .3rem;border-radius:4px}</style></head><body>
{{if .Key}}<p>Handing the key to the AstraBox CLI on this computer…</p>
<form id="handover" method="post" action="{{.Callback}}"><input type="hidden" name="state" value="{{.State}}">
<input type="hidden" name="key" value="{{.Key}}"><noscript><button type="submit">Continue</button></noscript></form>
<script>document.getElementById("handover").submit()</script>
{{else}}<h1>Sign in the AstraBox CLI?</h1>
<p>The <code>astrabox</code> command on this computer asks for an API key of <b>{{.User}}</b> ({{.Role}}),
valid {{.Days}} days. Continue only if you just ran <code>astrabox login</code>.</p>
<form method="post"><input type="hidden" name="port" value="{{.Port}}"><input type="hidden" name="state" value="{{.State}}">
<input type="hidden" name="token" value="{{.Token}}"><button type="submit">Create the key</button></form>{{end}}
</body></html>`))

// cliParams reads and checks port and state.
func cliParams(v url.Values) (int, string, bool) {
	port, err := strconv.Atoi(v.Get("port"))
	state := v.Get("state")
	if err != nil || port < 1024 || port > 65535 || len(state) < 16 || len(state) > 128 {
		return 0, "", false
	}
	return port, state, true
}

// cliToken binds a confirmation to the browser session that saw it and
// the CLI's port and state.
func (h *Handler) cliToken(session string, port int, state string) string {
	m := hmac.New(sha256.New, h.cfg.Web.FlowKey)
	m.Write([]byte("astrabox-cli\x00" + session + "\x00" + strconv.Itoa(port) + "\x00" + state))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (h *Handler) cliLogin(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		httpx.WriteError(w, identity.Forbidden("a malformed form"))
		return
	}
	port, state, ok := cliParams(r.Form)
	if !ok || h.cfg.Web == nil || len(h.cfg.Web.FlowKey) == 0 {
		httpx.WriteError(w, identity.Forbidden("sign the CLI in with astrabox login (port 1024-65535 and a state of 16-128 characters)"))
		return
	}
	c, err := r.Cookie(SessionCookieName(h.cfg.Web.secure(r)))
	var p *identity.Principal
	if err == nil {
		p, err = h.cfg.Auth.AuthenticateWebSession(r.Context(), c.Value)
	}
	if err != nil {
		if r.Method == http.MethodPost || h.cfg.Web.OIDC == nil {
			httpx.WriteError(w, identity.Unauthorized())
			return
		}
		next := "/api/v1/auth/cli?" + url.Values{"port": {strconv.Itoa(port)}, "state": {state}}.Encode()
		http.Redirect(w, r, "/api/v1/auth/login?next="+url.QueryEscape(next), http.StatusFound)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; form-action 'self' http://127.0.0.1:"+strconv.Itoa(port)+"; frame-ancestors 'none'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	u, err := h.acc.GetUser(r.Context(), p.UserID)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	page := map[string]any{"User": u.ID, "Role": u.Role, "Port": port, "State": state, "Days": int(cliKeyLife.Hours() / 24)}
	if r.Method == http.MethodGet {
		page["Token"] = h.cliToken(c.Value, port, state)
		_ = cliPage.Execute(w, page)
		return
	}
	if !SameOrigin(r) || !hmac.Equal([]byte(r.PostForm.Get("token")), []byte(h.cliToken(c.Value, port, state))) {
		httpx.WriteError(w, identity.Forbidden("the confirmation did not come from this page"))
		return
	}
	k, err := h.acc.CreateKey(r.Context(), p, p.UserID, wire.APIKeyRequest{Name: "CLI, " + time.Now().UTC().Format("2006-01-02"),
		ExpiresInSeconds: int64(h.cliKeyLife().Seconds())})
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	page["Key"], page["Callback"] = k.Key, "http://127.0.0.1:"+strconv.Itoa(port)+"/callback"
	_ = cliPage.Execute(w, page)
}

// cliKeyLife is cliKeyLife within the server's maximum key lifetime.
func (h *Handler) cliKeyLife() time.Duration {
	if m := h.acc.MaxKeyLifetime(); m > 0 && m < cliKeyLife {
		return m
	}
	return cliKeyLife
}
