// Package console serves AstraBox's web console: the single-page app built
// from console/ (Vite, React) and embedded in the binary. The index is
// served at "/" and every asset under AssetPrefix, so the console never
// shadows an API route; the app routes on the URL's fragment (#/chat, ...).
//
// A binary built without the console (plain `go build`, no npm) embeds
// only a placeholder: "/" then answers a page saying how to build it.
package console

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// AssetPrefix is the URL path every asset of the console is served under
// (Vite's base in console/vite.config.ts).
const AssetPrefix = "/console/"

// The build writes ui/app (see ui/.gitignore); all: keeps the embed valid
// when only the placeholder is there.
//
//go:embed all:ui
var embedded embed.FS

//go:embed fallback.html
var fallbackPage []byte

// Handler serves the embedded console.
func Handler() http.Handler {
	app, err := fs.Sub(embedded, "ui/app")
	if err != nil { // cannot happen: the name is valid
		panic(err)
	}
	return New(app)
}

// Built reports whether the binary embeds a console build.
func Built() bool {
	_, err := fs.Stat(embedded, "ui/app/index.html")
	return err == nil
}

// New serves the console app in fsys (index.html at its root, assets
// beside it): GET "/" answers index.html, GET AssetPrefix+name the file
// name. Without index.html in fsys, "/" answers the fallback page.
func New(fsys fs.FS) http.Handler {
	index, err := fs.ReadFile(fsys, "index.html")
	if err != nil {
		index = nil
	}
	return &handler{fsys: fsys, index: index}
}

type handler struct {
	fsys  fs.FS
	index []byte // nil without a build
}

// contentSecurityPolicy lets the page load and connect to its own origin
// only: nothing from a CDN, no inline scripts. Inline styles are allowed
// (React style attributes, xterm.js), as are WebSockets to the origin. The
// console starts no worker of any kind, so none may be started from it: a
// script injected into the page could not install a service worker.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self' ws: wss:; worker-src 'none'; " +
	"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	switch {
	case r.URL.Path == "/":
		hdr.Set("Content-Security-Policy", contentSecurityPolicy)
		// Pages the console opens (a sandbox's content among them) get no
		// handle on it, nor it on them.
		hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
		hdr.Set("Cache-Control", "no-cache")
		page := h.index
		if page == nil {
			page = fallbackPage
		}
		http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(page))
	case strings.HasPrefix(r.URL.Path, AssetPrefix):
		h.serveAsset(w, r, strings.TrimPrefix(r.URL.Path, AssetPrefix))
	default:
		http.NotFound(w, r)
	}
}

// serveAsset serves one file of the build. Names under assets/ carry a
// content hash (Vite), so they are cached for good; others revalidate.
func (h *handler) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	name = path.Clean(name)
	if !fs.ValidPath(name) || name == "." || name == "index.html" {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(h.fsys, name)
	if err != nil { // missing, or a directory
		http.NotFound(w, r)
		return
	}
	if strings.HasPrefix(name, "assets/") {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, path.Base(name), time.Time{}, bytes.NewReader(b))
}
