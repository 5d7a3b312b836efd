package credproxy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/sandbox"
)

const credSecret = "s3cr3t-VALUE-must-never-show"

func cred(name, value string) Credential {
	return Credential{Name: name, Source: CredentialSource{Type: "inline", Value: value}}
}

func bind(name string, hosts []string, auth CredentialAuth) CredentialBinding {
	return CredentialBinding{Name: name, Match: CredentialMatch{Hosts: hosts}, Auth: auth}
}

func allowAll(string) bool { return true }

func TestNewValidation(t *testing.T) {
	bearer := CredentialAuth{Type: AuthBearer, Credential: "tok"}
	base := func() CreateRequest {
		return CreateRequest{Credentials: []Credential{cred("tok", credSecret)}, Bindings: []CredentialBinding{bind("b", []string{"api.example.com"}, bearer)}}
	}
	tests := []struct {
		name string
		mod  func(*CreateRequest)
		code sandbox.Code // "" valid
		want string       // in the message
	}{
		{"valid", func(*CreateRequest) {}, "", ""},
		{"empty", func(r *CreateRequest) { *r = CreateRequest{} }, "", ""},
		{"source type defaults to inline", func(r *CreateRequest) { r.Credentials[0].Source.Type = "" }, "", ""},
		{"source type", func(r *CreateRequest) { r.Credentials[0].Source.Type = "env" }, sandbox.CodeInvalidRequest, "not supported"},
		{"empty value", func(r *CreateRequest) { r.Credentials[0].Source.Value = "" }, sandbox.CodeInvalidRequest, "must not be empty"},
		{"value with a newline", func(r *CreateRequest) { r.Credentials[0].Source.Value = credSecret + "\r\nX-Evil: 1" }, sandbox.CodeInvalidRequest, "header text"},
		{"value too long", func(r *CreateRequest) { r.Credentials[0].Source.Value = strings.Repeat(credSecret, 1000) }, sandbox.CodeInvalidRequest, "exceeds"},
		{"blank name", func(r *CreateRequest) { r.Credentials[0].Name = " " }, sandbox.CodeInvalidRequest, "credential name"},
		{"name with a slash", func(r *CreateRequest) { r.Credentials[0].Name = "a/b" }, sandbox.CodeInvalidRequest, "credential name"},
		{"duplicate credential", func(r *CreateRequest) { r.Credentials = append(r.Credentials, cred("tok", "x")) }, sandbox.CodeInvalidRequest, "twice"},
		{"duplicate binding", func(r *CreateRequest) { r.Bindings = append(r.Bindings, r.Bindings[0]) }, sandbox.CodeInvalidRequest, "twice"},
		{"unknown credential", func(r *CreateRequest) { r.Bindings[0].Auth.Credential = "nope" }, sandbox.CodeInvalidRequest, `names credential "nope"`},
		{"no hosts", func(r *CreateRequest) { r.Bindings[0].Match.Hosts = nil }, sandbox.CodeInvalidRequest, "at least one host"},
		{"address host", func(r *CreateRequest) { r.Bindings[0].Match.Hosts = []string{"192.0.2.1"} }, sandbox.CodeInvalidRequest, "not a domain"},
		{"host with a port", func(r *CreateRequest) { r.Bindings[0].Match.Hosts = []string{"api.example.com:443"} }, sandbox.CodeInvalidRequest, "not a domain"},
		{"wildcard of a top-level domain", func(r *CreateRequest) { r.Bindings[0].Match.Hosts = []string{"*.com"} }, sandbox.CodeInvalidRequest, "two labels"},
		{"scheme", func(r *CreateRequest) { r.Bindings[0].Match.Schemes = []string{"ftp"} }, sandbox.CodeInvalidRequest, "not https or http"},
		{"port", func(r *CreateRequest) { r.Bindings[0].Match.Ports = []int{0} }, sandbox.CodeInvalidRequest, "not a port"},
		{"method", func(r *CreateRequest) { r.Bindings[0].Match.Methods = []string{"GE T"} }, sandbox.CodeInvalidRequest, "not an HTTP method"},
		{"relative path", func(r *CreateRequest) { r.Bindings[0].Match.Paths = []string{"v1/*"} }, sandbox.CodeInvalidRequest, "absolute path"},
		{"inner star", func(r *CreateRequest) { r.Bindings[0].Match.Paths = []string{"/v1/*/x"} }, sandbox.CodeInvalidRequest, "absolute path"},
		{"dot segment", func(r *CreateRequest) { r.Bindings[0].Match.Paths = []string{"/v1/../*"} }, sandbox.CodeInvalidRequest, "dot segments"},
		{"no auth type", func(r *CreateRequest) { r.Bindings[0].Auth.Type = "" }, sandbox.CodeInvalidRequest, "auth.type is required"},
		{"auth type", func(r *CreateRequest) { r.Bindings[0].Auth.Type = "oauth" }, sandbox.CodeInvalidRequest, "not bearer"},
		{"bearer with a name", func(r *CreateRequest) { r.Bindings[0].Auth.Name = "X-Key" }, sandbox.CodeInvalidRequest, "takes only credential"},
		{"apiKey without a name", func(r *CreateRequest) { r.Bindings[0].Auth.Type = AuthAPIKey }, sandbox.CodeInvalidRequest, "not a header name"},
		{"apiKey of a framing header", func(r *CreateRequest) {
			r.Bindings[0].Auth = CredentialAuth{Type: AuthAPIKey, Name: "content-length", Credential: "tok"}
		}, sandbox.CodeInvalidRequest, "frames or routes"},
		{"apiKey of a forwarding header", func(r *CreateRequest) {
			r.Bindings[0].Auth = CredentialAuth{Type: AuthAPIKey, Name: "X-Forwarded-For", Credential: "tok"}
		}, sandbox.CodeInvalidRequest, "frames or routes"},
		{"customHeaders without headers", func(r *CreateRequest) { r.Bindings[0].Auth = CredentialAuth{Type: AuthCustomHeaders} }, sandbox.CodeInvalidRequest, "1 to"},
		{"customHeaders twice the same", func(r *CreateRequest) {
			r.Bindings[0].Auth = CredentialAuth{Type: AuthCustomHeaders, Headers: []CustomHeader{{"x-a", "tok"}, {"X-A", "tok"}}}
		}, sandbox.CodeInvalidRequest, "given twice"},
		{"host not explicitly allowed", func(r *CreateRequest) { r.Bindings[0].Match.Hosts = []string{"elsewhere.test"} }, sandbox.CodeInvalidRequest, "explicit allow rule"},
		{"ambiguous bindings", func(r *CreateRequest) {
			r.Bindings = append(r.Bindings, bind("b2", []string{"API.example.com."}, bearer))
		}, sandbox.CodeInvalidRequest, "can match the same request"},
		{"exact beside wildcard is not ambiguous", func(r *CreateRequest) {
			r.Bindings = append(r.Bindings, bind("b2", []string{"*.example.com"}, bearer))
		}, "", ""},
		{"nested wildcards are ambiguous", func(r *CreateRequest) {
			r.Bindings[0].Match.Hosts = []string{"*.example.com"}
			r.Bindings = append(r.Bindings, bind("b2", []string{"*.api.example.com"}, bearer))
		}, sandbox.CodeInvalidRequest, "can match the same request"},
		{"disjoint paths are not ambiguous", func(r *CreateRequest) {
			r.Bindings[0].Match.Paths = []string{"/a/*"}
			b := bind("b2", []string{"api.example.com"}, bearer)
			b.Match.Paths = []string{"/b"}
			r.Bindings = append(r.Bindings, b)
		}, "", ""},
		{"disjoint ports are not ambiguous", func(r *CreateRequest) {
			b := bind("b2", []string{"api.example.com"}, bearer)
			b.Match.Ports = []int{8443}
			r.Bindings = append(r.Bindings, b)
		}, "", ""},
	}
	covered := func(h string) bool { return h != "elsewhere.test" }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := base()
			tt.mod(&req)
			v, err := New(req, covered)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if v.Revision != 1 {
					t.Fatalf("revision %d", v.Revision)
				}
				return
			}
			if sandbox.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want %s with %q", err, tt.code, tt.want)
			}
			if strings.Contains(err.Error(), credSecret) {
				t.Fatalf("the error carries the value: %v", err)
			}
		})
	}
}

func TestSetNormalizesAndRenders(t *testing.T) {
	v, err := New(CreateRequest{
		Credentials: []Credential{cred("b", "dXNlcjpwYXNz"), cred("a", credSecret), cred("id", "client-id")},
		Bindings: []CredentialBinding{
			{Name: "z-bearer", Match: CredentialMatch{Hosts: []string{"API.Example.com."}}, Auth: CredentialAuth{Type: AuthBearer, Credential: "a"}},
			{Name: "basic", Match: CredentialMatch{Schemes: []string{"HTTP", "http"}, Ports: []int{80, 80}, Hosts: []string{"basic.test"}, Methods: []string{"get"}, Paths: []string{"/basic"}},
				Auth: CredentialAuth{Type: AuthBasic, Credential: "b"}},
			{Name: "key", Match: CredentialMatch{Hosts: []string{"*.key.test"}}, Auth: CredentialAuth{Type: AuthAPIKey, Name: "x-api-key", Credential: "a"}},
			{Name: "custom", Match: CredentialMatch{Hosts: []string{"c.test"}}, Auth: CredentialAuth{Type: AuthCustomHeaders,
				Headers: []CustomHeader{{"x-client-id", "id"}, {"X-Client-Secret", "a"}}}},
		},
	}, allowAll)
	if err != nil {
		t.Fatal(err)
	}
	st := v.State()
	if names := fmt.Sprint(st.Credentials[0].Name, st.Credentials[1].Name, st.Credentials[2].Name); names != "abid" {
		t.Errorf("credentials not ordered by name: %+v", st.Credentials)
	}
	var bnames []string
	for _, b := range st.Bindings {
		bnames = append(bnames, b.Name)
	}
	if !reflect.DeepEqual(bnames, []string{"basic", "custom", "key", "z-bearer"}) {
		t.Errorf("bindings %v", bnames)
	}
	basic := st.Bindings[0]
	if want := (CredentialMatch{Schemes: []string{"http"}, Ports: []int{80}, Hosts: []string{"basic.test"}, Methods: []string{"GET"}, Paths: []string{"/basic"}}); !reflect.DeepEqual(*basic.Match, want) {
		t.Errorf("basic match %+v", *basic.Match)
	}
	bearer := st.Bindings[3]
	if want := (CredentialMatch{Schemes: []string{"https"}, Ports: []int{443}, Hosts: []string{"api.example.com"},
		Methods: []string{"GET", "POST", "PUT", "PATCH", "DELETE"}, Paths: []string{"/*"}}); !reflect.DeepEqual(*bearer.Match, want) {
		t.Errorf("defaults %+v", *bearer.Match)
	}
	if a := st.Bindings[2].Auth; a.Type != AuthAPIKey || a.Name != "X-Api-Key" {
		t.Errorf("apiKey metadata %+v", a)
	}
	if a := st.Bindings[1].Auth; a.Type != AuthCustomHeaders || a.Name != "" {
		t.Errorf("customHeaders metadata %+v", a)
	}
	// Nothing shown carries a value or a credential reference.
	for _, shown := range []any{st, v.CredentialList(), v.BindingList(), v, fmt.Sprintf("%+v %#v", v, v.Credentials)} {
		b, _ := json.Marshal(shown)
		if s := string(b) + fmt.Sprint(shown); strings.Contains(s, credSecret) || strings.Contains(s, "dXNlcjpwYXNz") || strings.Contains(s, "client-id") {
			t.Errorf("shown: %s", s)
		}
	}
	got := map[string][]egress.BindingHeader{}
	for _, b := range v.ProxyBindings() {
		got[b.Name] = b.Headers
	}
	want := map[string][]egress.BindingHeader{
		"basic":    {{Name: "Authorization", Value: "Basic dXNlcjpwYXNz"}},
		"custom":   {{Name: "X-Client-Id", Value: "client-id"}, {Name: "X-Client-Secret", Value: credSecret}},
		"key":      {{Name: "X-Api-Key", Value: credSecret}},
		"z-bearer": {{Name: "Authorization", Value: "Bearer " + credSecret}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("proxy bindings %v", got)
	}
	// The document (what the server seals) round-trips, values included.
	doc, err := v.Document()
	if err != nil || !strings.Contains(string(doc), credSecret) {
		t.Fatalf("document: %v", err)
	}
	back, err := ParseDocument(doc)
	if err != nil || !reflect.DeepEqual(back, v) {
		t.Fatalf("round trip: %v\n%+v\n%+v", err, back, v)
	}
	if _, err := ParseDocument([]byte(`{"credentials":[{"name":"b"},{"name":"a"}]}`)); err == nil {
		t.Fatal("a document out of order was read")
	}
}

// TestSetApply follows the revisions of OpenSandbox's mutation test:
// add a credential and a binding, delete the binding, replace the
// credential and add another binding, delete both.
func TestSetApply(t *testing.T) {
	rev := func(n int64) *int64 { return &n }
	apiKey := func(name, path string) CredentialBinding {
		b := bind(name, []string{"target.test"}, CredentialAuth{Type: AuthAPIKey, Name: "X-Runtime-Token", Credential: "runtime-token"})
		b.Match.Schemes, b.Match.Ports, b.Match.Methods, b.Match.Paths = []string{"http"}, []int{80}, []string{"GET"}, []string{path}
		return b
	}
	v, err := New(CreateRequest{}, allowAll)
	if err != nil || v.Revision != 1 || len(v.State().Credentials) != 0 || len(v.State().Bindings) != 0 {
		t.Fatalf("create: %+v %v", v, err)
	}
	steps := []struct {
		name  string
		m     Mutation
		code  sandbox.Code
		creds string // names, then the value of runtime-token
		binds string
	}{
		{"add", Mutation{ExpectedRevision: rev(1), Credentials: &CredentialMutations{Add: []Credential{cred("runtime-token", "v1")}},
			Bindings: &BindingMutations{Add: []CredentialBinding{apiKey("runtime-added", "/runtime-added")}}}, "", "runtime-token=v1", "runtime-added@2"},
		{"stale revision", Mutation{ExpectedRevision: rev(1)}, CodeRevisionMismatch, "", ""},
		{"add an existing credential", Mutation{Credentials: &CredentialMutations{Add: []Credential{cred("runtime-token", "x")}}}, sandbox.CodeConflict, "", ""},
		{"replace a missing credential", Mutation{Credentials: &CredentialMutations{Replace: []Credential{cred("nope", "x")}}}, sandbox.CodeConflict, "", ""},
		{"delete a missing binding", Mutation{Bindings: &BindingMutations{Delete: []string{"nope"}}}, sandbox.CodeConflict, "", ""},
		{"one name twice", Mutation{Credentials: &CredentialMutations{Delete: []string{"runtime-token"}, Add: []Credential{cred("runtime-token", "x")}}}, sandbox.CodeInvalidRequest, "", ""},
		{"delete a credential a binding names", Mutation{Credentials: &CredentialMutations{Delete: []string{"runtime-token"}}}, sandbox.CodeInvalidRequest, "", ""},
		{"delete the binding", Mutation{ExpectedRevision: rev(2), Bindings: &BindingMutations{Delete: []string{"runtime-added"}}}, "", "runtime-token=v1", ""},
		{"replace and add", Mutation{ExpectedRevision: rev(3), Credentials: &CredentialMutations{Replace: []Credential{cred("runtime-token", "v2")}},
			Bindings: &BindingMutations{Add: []CredentialBinding{apiKey("runtime-replaced", "/runtime-replaced")}}}, "", "runtime-token=v2", "runtime-replaced@4"},
		{"a failed mutation changes nothing", Mutation{Credentials: &CredentialMutations{Replace: []Credential{cred("runtime-token", "v3")}},
			Bindings: &BindingMutations{Add: []CredentialBinding{apiKey("bad", "no-slash")}}}, sandbox.CodeInvalidRequest, "", ""},
		{"delete the other binding", Mutation{ExpectedRevision: rev(4), Bindings: &BindingMutations{Delete: []string{"runtime-replaced"}}}, "", "runtime-token=v2", ""},
		{"delete the credential", Mutation{ExpectedRevision: rev(5), Credentials: &CredentialMutations{Delete: []string{"runtime-token"}}}, "", "", ""},
	}
	for _, s := range steps {
		next, err := v.Apply(s.m, allowAll)
		if s.code != "" {
			if sandbox.CodeOf(err) != s.code {
				t.Fatalf("%s: %v, want %s", s.name, err, s.code)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if next.Revision != v.Revision+1 {
			t.Fatalf("%s: revision %d after %d", s.name, next.Revision, v.Revision)
		}
		var creds, binds []string
		for _, c := range next.Credentials {
			creds = append(creds, c.Name+"="+c.Value)
		}
		for _, b := range next.Bindings {
			binds = append(binds, fmt.Sprintf("%s@%d", b.Name, b.Revision))
		}
		if strings.Join(creds, ",") != s.creds || strings.Join(binds, ",") != s.binds {
			t.Fatalf("%s: credentials %v bindings %v, want %q %q", s.name, creds, binds, s.creds, s.binds)
		}
		v = next
	}
	if v.Revision != 6 {
		t.Fatalf("final revision %d, want 6", v.Revision)
	}
}
