package runner

import (
	"errors"
	"net/http"
	"strings"
)

// modelRoute is one request a box may send on its model path: a method
// and a path under the endpoint's base, either exactly (prefix false) or
// any path that continues it (prefix true: "/models/" covers
// "/models/gpt-4o").
type modelRoute struct {
	method string
	path   string
	prefix bool
}

// modelRoutes are the routes of each model API a profile may name ("" is
// the default wire, openai-chat). Nothing else reaches the endpoint with
// the real key: not the provider's file, batch or admin routes.
var modelRoutes = map[string][]modelRoute{
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

// allowedModelPath returns the path to forward, under the endpoint's base, for
// req (whose path the box sends under "/v1"), or an error saying why it
// is refused. The path is judged exactly as it is forwarded (its escaped
// form): a path with a dot segment, an empty segment, a backslash or any
// percent-encoding is refused, so the endpoint cannot read it differently
// from the check.
func allowedModelPath(req *http.Request, routes []modelRoute) (string, error) {
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
	for _, r := range routes {
		if req.Method != r.method {
			continue
		}
		if rest == r.path || (r.prefix && strings.HasPrefix(rest, r.path) && len(rest) > len(r.path)) {
			return rest, nil
		}
	}
	return "", errors.New("the model path serves only the model API's routes (" + req.Method + " " + rest + " is not one)")
}
