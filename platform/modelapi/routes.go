// Package modelapi is what AstraBox knows of the model APIs a RuntimeProfile
// names: the routes a box may call through its model path (and how a path
// is judged as it is forwarded), and the check of an endpoint with its
// key (test-model). The model path itself is the runner's; the HTTP edge
// only parses and answers. Standard library only.
package modelapi

import (
	"errors"
	"net/http"
	"strings"
)

// Route is one request a box may send on its model path: a method and a
// path under the endpoint's base, either exactly (Prefix false) or any
// path that continues it (Prefix true: "/models/" covers
// "/models/gpt-4o").
type Route struct {
	Method string
	Path   string
	Prefix bool
}

// routes are the routes of each model API a profile may name ("" is the
// default wire, openai-chat). Nothing else reaches the endpoint with the
// real key: not the provider's file, batch or admin routes.
var routes = map[string][]Route{
	"": {
		{http.MethodPost, "/chat/completions", false},
		{http.MethodGet, "/models", false},
		{http.MethodGet, "/models/", true},
	},
	"openai-chat": {
		{http.MethodPost, "/chat/completions", false},
		{http.MethodGet, "/models", false},
		{http.MethodGet, "/models/", true},
	},
}

// Routes returns the routes of model API api (the default wire's for an
// unknown or empty one).
func Routes(api string) []Route {
	if rs, ok := routes[api]; ok {
		return rs
	}
	return routes[""]
}

// AllowedPath returns the path to forward, under the endpoint's base, for
// req (whose path the box sends under "/v1"), or an error saying why it
// is refused. The path is judged exactly as it is forwarded (its escaped
// form): a path with a dot segment, an empty segment, a backslash or any
// percent-encoding is refused, so the endpoint cannot read it differently
// from the check.
func AllowedPath(req *http.Request, allowed []Route) (string, error) {
	raw := req.URL.EscapedPath()
	rest, ok := strings.CutPrefix(raw, "/v1")
	if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
		return "", errors.New("the model path serves only paths under /v1")
	}
	if strings.ContainsAny(rest, "%\\") {
		return "", errors.New("the model path refuses encoded characters and backslashes")
	}
	for i, seg := range strings.Split(rest, "/") {
		if seg == "." || seg == ".." || (seg == "" && i > 0) {
			return "", errors.New("the model path refuses dot and empty segments")
		}
	}
	for _, r := range allowed {
		if req.Method != r.Method {
			continue
		}
		if rest == r.Path || (r.Prefix && strings.HasPrefix(rest, r.Path) && len(rest) > len(r.Path)) {
			return rest, nil
		}
	}
	return "", errors.New("the model path serves only the model API's routes (" + req.Method + " " + rest + " is not one)")
}
