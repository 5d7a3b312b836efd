// Package credproxy is the model of OpenSandbox's credential proxy: the
// per-sandbox set of credentials and bindings that egress-api.yaml serves
// under /credential-vault and its sub-routes, as AstraBox keeps and
// applies it. A Set holds credentials (a name and an inline value,
// write-only: no answer carries a value) and bindings (which requests a
// credential goes into: match, and auth saying which headers carry which
// credentials). Every change makes a new revision, atomically: a mutation
// applies entirely or not at all. The package is pure and without I/O:
// package lifecycle keeps a Set sealed in the store and hands the egress
// proxy its ProxyBindings (egress.Manager.SetBindings); package api serves
// the routes. Errors carry sandbox codes, and no message carries a value.
package credproxy

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/sandbox"
)

// Error codes of the credential proxy, with their HTTP statuses in
// statusByCode (registered in the one table, sandbox.RegisterStatus). The wire strings name
// OpenSandbox's resource, the Credential Vault.
const (
	// CodeNotEnabled: the sandbox was not created with
	// credentialProxy.enabled.
	CodeNotEnabled sandbox.Code = "CREDENTIAL_PROXY_NOT_ENABLED"
	// CodeUnavailable: the sandbox's backend, or this server, does not
	// carry the sandbox's traffic through an egress proxy that can
	// terminate TLS.
	CodeUnavailable sandbox.Code = "CREDENTIAL_PROXY_UNAVAILABLE"
	// CodeNotFound: the sandbox has no Set.
	CodeNotFound sandbox.Code = "CREDENTIAL_VAULT_NOT_FOUND"
	// CodeExists: a create for a sandbox that has one.
	CodeExists sandbox.Code = "CREDENTIAL_VAULT_EXISTS"
	// CodeRevisionMismatch: expectedRevision is not the current revision
	// (or another change came first).
	CodeRevisionMismatch sandbox.Code = "CREDENTIAL_VAULT_REVISION_MISMATCH"
	// CodeCredentialNotFound and CodeBindingNotFound: a GET of one.
	CodeCredentialNotFound sandbox.Code = "CREDENTIAL_NOT_FOUND"
	CodeBindingNotFound    sandbox.Code = "CREDENTIAL_BINDING_NOT_FOUND"
)

func init() { sandbox.RegisterStatuses(statusByCode) }

// statusByCode are the HTTP statuses of the credential proxy's codes. A
// mutation that adds a name the Set has, or replaces or deletes one it
// lacks, is sandbox.CodeConflict (409): it was written against another
// revision.
var statusByCode = map[sandbox.Code]int{
	CodeNotEnabled:         http.StatusPreconditionFailed,
	CodeUnavailable:        http.StatusPreconditionFailed,
	CodeNotFound:           http.StatusNotFound,
	CodeExists:             http.StatusConflict,
	CodeRevisionMismatch:   http.StatusConflict,
	CodeCredentialNotFound: http.StatusNotFound,
	CodeBindingNotFound:    http.StatusNotFound,
}

// The wire shapes (egress-api.yaml's schemas of the same names).

// Credential is a credential as a request gives it.
type Credential struct {
	Name   string           `json:"name"`
	Source CredentialSource `json:"source"`
}

// CredentialSource is OpenSandbox's InlineCredentialSource: Type "inline"
// (also when empty), Value write-only.
type CredentialSource struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// String shows the source without its value.
func (s CredentialSource) String() string { return "{Type:" + s.Type + " Value:<redacted>}" }

// GoString is String for %#v.
func (s CredentialSource) GoString() string { return "credproxy.CredentialSource" + s.String() }

// LogValue logs the source as String shows it.
func (s CredentialSource) LogValue() slog.Value { return slog.StringValue(s.String()) }

// CredentialBinding says which requests get which credentials.
type CredentialBinding struct {
	Name  string          `json:"name"`
	Match CredentialMatch `json:"match"`
	Auth  CredentialAuth  `json:"auth"`
}

// CredentialMatch selects requests; empty lists take the specification's
// defaults (schemes [https], ports [443], methods GET POST PUT PATCH
// DELETE, paths ["/*"]); hosts are required.
type CredentialMatch struct {
	Schemes []string `json:"schemes,omitempty"`
	Ports   []int    `json:"ports,omitempty"`
	Hosts   []string `json:"hosts"`
	Methods []string `json:"methods,omitempty"`
	Paths   []string `json:"paths,omitempty"`
}

// Auth types.
const (
	AuthBearer        = "bearer"        // Authorization: Bearer <credential>
	AuthBasic         = "basic"         // Authorization: Basic <credential> (already base64 of user:password)
	AuthAPIKey        = "apiKey"        // <Name>: <credential>
	AuthCustomHeaders = "customHeaders" // each of Headers: <name>: <its credential>
)

// CredentialAuth is the union of the specification's auth shapes: Type
// decides which other fields it takes (Credential for bearer and basic,
// Name and Credential for apiKey, Headers for customHeaders). Credentials
// are named, never given here.
type CredentialAuth struct {
	Type       string         `json:"type"`
	Credential string         `json:"credential,omitempty"`
	Name       string         `json:"name,omitempty"`
	Headers    []CustomHeader `json:"headers,omitempty"`
}

// CustomHeader is one header of a customHeaders auth.
type CustomHeader struct {
	Name       string `json:"name"`
	Credential string `json:"credential"`
}

// CreateRequest is the body of POST /credential-vault (both lists may
// be empty, or null).
type CreateRequest struct {
	Credentials []Credential        `json:"credentials"`
	Bindings    []CredentialBinding `json:"bindings"`
}

// Mutation is the body of PATCH /credential-vault.
type Mutation struct {
	ExpectedRevision *int64               `json:"expectedRevision,omitempty"`
	Credentials      *CredentialMutations `json:"credentials,omitempty"`
	Bindings         *BindingMutations    `json:"bindings,omitempty"`
}

// CredentialMutations change credentials: Delete, then Replace (a new
// value), then Add; a name may be in one of them only.
type CredentialMutations struct {
	Add     []Credential `json:"add,omitempty"`
	Replace []Credential `json:"replace,omitempty"`
	Delete  []string     `json:"delete,omitempty"`
}

// BindingMutations change bindings as CredentialMutations do credentials.
type BindingMutations struct {
	Add     []CredentialBinding `json:"add,omitempty"`
	Replace []CredentialBinding `json:"replace,omitempty"`
	Delete  []string            `json:"delete,omitempty"`
}

// State is the sanitized Set: OpenSandbox's CredentialVaultState.
type State struct {
	Revision    int64                `json:"revision"`
	Credentials []CredentialMetadata `json:"credentials"`
	Bindings    []BindingMetadata    `json:"bindings"`
}

// CredentialList is OpenSandbox's CredentialListResponse.
type CredentialList struct {
	Revision    int64                `json:"revision"`
	Credentials []CredentialMetadata `json:"credentials"`
}

// BindingList is OpenSandbox's CredentialBindingListResponse.
type BindingList struct {
	Revision int64             `json:"revision"`
	Bindings []BindingMetadata `json:"bindings"`
}

// CredentialMetadata is a credential without its value; Revision is the
// revision of the Set that last set it.
type CredentialMetadata struct {
	Name       string `json:"name"`
	SourceType string `json:"sourceType"`
	Revision   int64  `json:"revision"`
}

// BindingMetadata is a binding as it is shown: its normalized match, and
// its auth's type and, for apiKey, header name (no credential names).
type BindingMetadata struct {
	Name     string           `json:"name"`
	Revision int64            `json:"revision"`
	Match    *CredentialMatch `json:"match,omitempty"`
	Auth     *AuthMetadata    `json:"auth,omitempty"`
}

// AuthMetadata is OpenSandbox's CredentialAuthMetadata.
type AuthMetadata struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

// Set is a sandbox's credentials and bindings at one revision: the
// document the server keeps sealed (OpenSandbox's Credential Vault). Credentials and Bindings are ordered by name, each name once,
// each valid (New and Apply keep them so).
type Set struct {
	Revision    int64              `json:"revision"`
	Credentials []StoredCredential `json:"credentials"`
	Bindings    []StoredBinding    `json:"bindings"`
}

// StoredCredential is a stored credential, with its value. Its JSON has
// no value: only Set.Document carries values.
type StoredCredential struct {
	Name       string `json:"name"`
	SourceType string `json:"sourceType"`
	Value      string `json:"-"`
	Revision   int64  `json:"revision"`
}

// String shows the credential without its value.
func (c StoredCredential) String() string {
	return fmt.Sprintf("{Name:%s SourceType:%s Revision:%d Value:<redacted>}", c.Name, c.SourceType, c.Revision)
}

// GoString is String for %#v.
func (c StoredCredential) GoString() string { return "credproxy.StoredCredential" + c.String() }

// LogValue logs the credential as String shows it.
func (c StoredCredential) LogValue() slog.Value { return slog.StringValue(c.String()) }

// StoredBinding is a stored binding (normalized) and the revision that
// last set it.
type StoredBinding struct {
	CredentialBinding
	Revision int64 `json:"revision"`
}

// String shows the Set without any value.
func (v *Set) String() string {
	return fmt.Sprintf("{Revision:%d Credentials:%v Bindings:%d}", v.Revision, v.Credentials, len(v.Bindings))
}

// LogValue logs the Set as String shows it.
func (v *Set) LogValue() slog.Value { return slog.StringValue(v.String()) }

// document is the JSON of Set.Document: the Set with values.
type document struct {
	Revision    int64                `json:"revision"`
	Credentials []documentCredential `json:"credentials"`
	Bindings    []StoredBinding      `json:"bindings"`
}

type documentCredential struct {
	Name       string `json:"name"`
	SourceType string `json:"sourceType"`
	Value      string `json:"value"`
	Revision   int64  `json:"revision"`
}

// Document is the Set as the JSON document the server seals: the only
// form of a Set that carries its values (ParseDocument reads it).
func (v *Set) Document() ([]byte, error) {
	d := document{Revision: v.Revision, Credentials: make([]documentCredential, len(v.Credentials)), Bindings: v.Bindings}
	for i, c := range v.Credentials {
		d.Credentials[i] = documentCredential(c)
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode credential vault: %w", err)
	}
	return b, nil
}

// ParseDocument reads what Document made. The document is trusted
// (it comes sealed from the server's own store) but still checked for
// shape: each list ordered by name, each name once.
func ParseDocument(b []byte) (*Set, error) {
	var d document
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, errors.New("decode credential vault: malformed document")
	}
	v := &Set{Revision: d.Revision, Credentials: make([]StoredCredential, len(d.Credentials)), Bindings: d.Bindings}
	if v.Bindings == nil {
		v.Bindings = []StoredBinding{}
	}
	for i, c := range d.Credentials {
		v.Credentials[i] = StoredCredential(c)
	}
	for i := 1; i < len(v.Credentials); i++ {
		if v.Credentials[i-1].Name >= v.Credentials[i].Name {
			return nil, errors.New("decode credential vault: credentials out of order")
		}
	}
	for i := 1; i < len(v.Bindings); i++ {
		if v.Bindings[i-1].Name >= v.Bindings[i].Name {
			return nil, errors.New("decode credential vault: bindings out of order")
		}
	}
	return v, nil
}

// New makes revision 1 of a Set from a create request. covered reports
// whether the sandbox's egress policy explicitly allows a binding host
// (see egress.ExplicitlyAllowed). Errors carry codes: CodeInvalidRequest for
// what the request gets wrong; no message carries a value.
func New(req CreateRequest, covered func(host string) bool) (*Set, error) {
	v := &Set{Revision: 1, Credentials: []StoredCredential{}, Bindings: []StoredBinding{}}
	for _, c := range req.Credentials {
		vc, err := normalizeCredential(c, 1)
		if err != nil {
			return nil, err
		}
		if _, ok := v.credential(vc.Name); ok {
			return nil, invalid("credential %q is given twice", vc.Name)
		}
		v.Credentials = insertSorted(v.Credentials, vc, func(c StoredCredential) string { return c.Name })
	}
	for _, b := range req.Bindings {
		vb, err := normalizeBinding(b, 1)
		if err != nil {
			return nil, err
		}
		if _, ok := v.binding(vb.Name); ok {
			return nil, invalid("binding %q is given twice", vb.Name)
		}
		v.Bindings = insertSorted(v.Bindings, vb, func(b StoredBinding) string { return b.Name })
	}
	if err := v.check(covered); err != nil {
		return nil, err
	}
	return v, nil
}

// Apply returns the next revision of v with m applied (v is unchanged).
// With m.ExpectedRevision not v's revision it fails with
// CodeRevisionMismatch; a name added that exists, or replaced or deleted
// that does not, fails with sandbox.CodeConflict; the rest as New.
func (v *Set) Apply(m Mutation, covered func(host string) bool) (*Set, error) {
	if m.ExpectedRevision != nil && *m.ExpectedRevision != v.Revision {
		return nil, sandbox.Errorf(CodeRevisionMismatch, "expectedRevision %d is not the current revision %d", *m.ExpectedRevision, v.Revision)
	}
	next := &Set{Revision: v.Revision + 1, Credentials: slices.Clone(v.Credentials), Bindings: slices.Clone(v.Bindings)}
	if c := m.Credentials; c != nil {
		var err error
		next.Credentials, err = mutate(next.Credentials, "credential", c.Delete, c.Replace, c.Add,
			func(c StoredCredential) string { return c.Name },
			func(c Credential) (StoredCredential, error) { return normalizeCredential(c, next.Revision) })
		if err != nil {
			return nil, err
		}
	}
	if b := m.Bindings; b != nil {
		var err error
		next.Bindings, err = mutate(next.Bindings, "binding", b.Delete, b.Replace, b.Add,
			func(b StoredBinding) string { return b.Name },
			func(b CredentialBinding) (StoredBinding, error) { return normalizeBinding(b, next.Revision) })
		if err != nil {
			return nil, err
		}
	}
	if err := next.check(covered); err != nil {
		return nil, err
	}
	return next, nil
}

// mutate applies deletes, then replaces, then adds to items (ordered by
// key, each key once), normalizing given items with norm.
func mutate[T, In any](items []T, kind string, del []string, replace, add []In, key func(T) string, norm func(In) (T, error)) ([]T, error) {
	mentioned := map[string]bool{}
	mention := func(name string) error {
		if mentioned[name] {
			return invalid("%s %q is named more than once in one mutation", kind, name)
		}
		mentioned[name] = true
		return nil
	}
	find := func(name string) (int, bool) {
		return slices.BinarySearchFunc(items, name, func(t T, n string) int { return cmp.Compare(key(t), n) })
	}
	for _, name := range del {
		if err := checkName(kind, name); err != nil {
			return nil, err
		}
		if err := mention(name); err != nil {
			return nil, err
		}
		i, ok := find(name)
		if !ok {
			return nil, sandbox.Errorf(sandbox.CodeConflict, "%s %q cannot be deleted: the vault has none of that name", kind, name)
		}
		items = slices.Delete(items, i, i+1)
	}
	for _, in := range replace {
		t, err := norm(in)
		if err != nil {
			return nil, err
		}
		if err := mention(key(t)); err != nil {
			return nil, err
		}
		i, ok := find(key(t))
		if !ok {
			return nil, sandbox.Errorf(sandbox.CodeConflict, "%s %q cannot be replaced: the vault has none of that name", kind, key(t))
		}
		items[i] = t
	}
	for _, in := range add {
		t, err := norm(in)
		if err != nil {
			return nil, err
		}
		if err := mention(key(t)); err != nil {
			return nil, err
		}
		if _, ok := find(key(t)); ok {
			return nil, sandbox.Errorf(sandbox.CodeConflict, "%s %q cannot be added: the vault has one of that name (replace it)", kind, key(t))
		}
		items = insertSorted(items, t, key)
	}
	return items, nil
}

// insertSorted inserts t into items ordered by key.
func insertSorted[T any](items []T, t T, key func(T) string) []T {
	i, _ := slices.BinarySearchFunc(items, key(t), func(x T, k string) int { return cmp.Compare(key(x), k) })
	return slices.Insert(items, i, t)
}

func (v *Set) credential(name string) (StoredCredential, bool) {
	i, ok := slices.BinarySearchFunc(v.Credentials, name, func(c StoredCredential, n string) int { return cmp.Compare(c.Name, n) })
	if !ok {
		return StoredCredential{}, false
	}
	return v.Credentials[i], true
}

func (v *Set) binding(name string) (StoredBinding, bool) {
	i, ok := slices.BinarySearchFunc(v.Bindings, name, func(b StoredBinding, n string) int { return cmp.Compare(b.Name, n) })
	if !ok {
		return StoredBinding{}, false
	}
	return v.Bindings[i], true
}

// State is the sanitized Set.
func (v *Set) State() State {
	return State{Revision: v.Revision, Credentials: v.CredentialList().Credentials, Bindings: v.BindingList().Bindings}
}

// CredentialList is every credential without its value.
func (v *Set) CredentialList() CredentialList {
	out := CredentialList{Revision: v.Revision, Credentials: make([]CredentialMetadata, len(v.Credentials))}
	for i, c := range v.Credentials {
		out.Credentials[i] = CredentialMetadata{Name: c.Name, SourceType: c.SourceType, Revision: c.Revision}
	}
	return out
}

// BindingList is every binding as it is shown.
func (v *Set) BindingList() BindingList {
	out := BindingList{Revision: v.Revision, Bindings: make([]BindingMetadata, len(v.Bindings))}
	for i, b := range v.Bindings {
		out.Bindings[i] = b.metadata()
	}
	return out
}

// CredentialMetadata is credential name without its value, or
// CodeCredentialNotFound.
func (v *Set) CredentialMetadata(name string) (CredentialMetadata, error) {
	c, ok := v.credential(name)
	if !ok {
		return CredentialMetadata{}, sandbox.Errorf(CodeCredentialNotFound, "the vault has no credential %q", name)
	}
	return CredentialMetadata{Name: c.Name, SourceType: c.SourceType, Revision: c.Revision}, nil
}

// BindingMetadata is binding name as it is shown, or CodeBindingNotFound.
func (v *Set) BindingMetadata(name string) (BindingMetadata, error) {
	b, ok := v.binding(name)
	if !ok {
		return BindingMetadata{}, sandbox.Errorf(CodeBindingNotFound, "the vault has no binding %q", name)
	}
	return b.metadata(), nil
}

func (b StoredBinding) metadata() BindingMetadata {
	m := b.Match
	m.Schemes, m.Ports, m.Hosts = slices.Clone(m.Schemes), slices.Clone(m.Ports), slices.Clone(m.Hosts)
	m.Methods, m.Paths = slices.Clone(m.Methods), slices.Clone(m.Paths)
	auth := &AuthMetadata{Type: b.Auth.Type}
	if b.Auth.Type == AuthAPIKey {
		auth.Name = b.Auth.Name
	}
	return BindingMetadata{Name: b.Name, Revision: b.Revision, Match: &m, Auth: auth}
}

// ProxyBindings is what the egress proxy applies for the Set (see
// egress.Manager.SetBindings): each binding with the headers its auth
// sets, the credentials' values formatted.
func (v *Set) ProxyBindings() []egress.Binding {
	out := make([]egress.Binding, 0, len(v.Bindings))
	for _, vb := range v.Bindings {
		value := func(name string) string {
			c, _ := v.credential(name) // check made sure it exists
			return c.Value
		}
		b := egress.Binding{Name: vb.Name, Schemes: vb.Match.Schemes, Ports: vb.Match.Ports, Hosts: vb.Match.Hosts,
			Methods: vb.Match.Methods, Paths: vb.Match.Paths}
		switch a := vb.Auth; a.Type {
		case AuthBearer:
			b.Headers = []egress.BindingHeader{{Name: "Authorization", Value: "Bearer " + value(a.Credential)}}
		case AuthBasic:
			b.Headers = []egress.BindingHeader{{Name: "Authorization", Value: "Basic " + value(a.Credential)}}
		case AuthAPIKey:
			b.Headers = []egress.BindingHeader{{Name: a.Name, Value: value(a.Credential)}}
		case AuthCustomHeaders:
			for _, h := range a.Headers {
				b.Headers = append(b.Headers, egress.BindingHeader{Name: h.Name, Value: value(h.Credential)})
			}
		}
		out = append(out, b)
	}
	return out
}
