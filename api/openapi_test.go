package api

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/api/identityapi"
	"github.com/astrabox/astrabox/api/platformapi"
)

// TestOpenAPIDocumentsPlatformRoutes: every /api/v1 route the server
// registers is a path of the OpenAPI document, with its method.
func TestOpenAPIDocumentsPlatformRoutes(t *testing.T) {
	var routes [][]string // {pattern, method, path}
	ids := identityapi.New(identityapi.Config{})
	for _, rt := range slices.Concat(platformapi.New(platformapi.Config{}).Routes(), ids.Routes(), ids.PublicRoutes()) {
		method, path, _ := strings.Cut(rt.Pattern, " ")
		routes = append(routes, []string{rt.Pattern, method, path})
	}
	if len(routes) < 15 {
		t.Fatalf("platformapi has only %d routes", len(routes))
	}
	doc := string(OpenAPI)
	// paths: "  /api/v1/x/{id}:" followed by its methods at 4 spaces.
	blocks := map[string]string{}
	var cur string
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "  /") && strings.HasSuffix(line, ":") {
			cur = strings.TrimSuffix(strings.TrimSpace(line), ":")
			continue
		}
		if !strings.HasPrefix(line, "  ") {
			cur = ""
		}
		if cur != "" && strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "     ") {
			blocks[cur] += strings.TrimSpace(line) + "\n"
		}
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	norm := func(p string) string { return param.ReplaceAllString(p, "{}") }
	documented := map[string]string{}
	for p, b := range blocks {
		documented[norm(p)] = b
	}
	for _, r := range routes {
		method, path := strings.ToLower(r[1]), norm(r[2])
		b, ok := documented[path]
		if !ok {
			t.Errorf("%s %s is not in the OpenAPI document", r[1], r[2])
			continue
		}
		if !strings.Contains(b, method+":") {
			t.Errorf("%s %s: the document's path has no %s operation", r[1], r[2], method)
		}
	}
}
