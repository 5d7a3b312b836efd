package egress

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/astrabox/astrabox/sandbox"
)

// Credential Vault: OpenSandbox's sandbox-local vault (egress-api.yaml,
// /credential-vault and its sub-routes), as AstraBox keeps and applies
// it. A vault holds credentials (a name and an inline value, write-only:
// no answer carries a value) and bindings (which requests a credential
// goes into: match, and auth saying which headers carry which
// credentials). Every change makes a new revision, atomically: a mutation
// applies entirely or not at all. This file and credvault_check.go are
// the model, pure and without I/O: package lifecycle keeps a vault sealed
// in the store and hands the proxy its ProxyBindings; package api serves
// the routes.

// Error codes of the Credential Vault, with their HTTP statuses in
// StatusByCode (the API registers them).
const (
	// CodeCredentialProxyDisabled: the sandbox was not created with
	// credentialProxy.enabled.
	CodeCredentialProxyDisabled sandbox.Code = "CREDENTIAL_PROXY_NOT_ENABLED"
	// CodeCredentialProxyUnavailable: the sandbox's backend, or this
	// server, does not carry the sandbox's traffic through an egress proxy
	// that can terminate TLS.
	CodeCredentialProxyUnavailable sandbox.Code = "CREDENTIAL_PROXY_UNAVAILABLE"
	// CodeVaultNotFound: the sandbox has no Credential Vault.
	CodeVaultNotFound sandbox.Code = "CREDENTIAL_VAULT_NOT_FOUND"
	// CodeVaultExists: a create for a sandbox that has one.
	CodeVaultExists sandbox.Code = "CREDENTIAL_VAULT_EXISTS"
	// CodeVaultRevision: expectedRevision is not the current revision (or
	// another change came first).
	CodeVaultRevision sandbox.Code = "CREDENTIAL_VAULT_REVISION_MISMATCH"
	// CodeCredentialNotFound and CodeBindingNotFound: a GET of one.
	CodeCredentialNotFound sandbox.Code = "CREDENTIAL_NOT_FOUND"
	CodeBindingNotFound    sandbox.Code = "CREDENTIAL_BINDING_NOT_FOUND"
)

// StatusByCode are the HTTP statuses of the Credential Vault's codes. A
// mutation that adds a name the vault has, or replaces or deletes one it
// lacks, is sandbox.CodeConflict (409): it was written against another
// revision.
var StatusByCode = map[sandbox.Code]int{
	CodeCredentialProxyDisabled:    http.StatusPreconditionFailed,
	CodeCredentialProxyUnavailable: http.StatusPreconditionFailed,
	CodeVaultNotFound:              http.StatusNotFound,
	CodeVaultExists:                http.StatusConflict,
	CodeVaultRevision:              http.StatusConflict,
	CodeCredentialNotFound:         http.StatusNotFound,
	CodeBindingNotFound:            http.StatusNotFound,
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
func (s CredentialSource) GoString() string { return "egress.CredentialSource" + s.String() }

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

// VaultCreateRequest is the body of POST /credential-vault (both lists may
// be empty, or null).
type VaultCreateRequest struct {
	Credentials []Credential        `json:"credentials"`
	Bindings    []CredentialBinding `json:"bindings"`
}

// VaultMutation is the body of PATCH /credential-vault.
type VaultMutation struct {
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

// VaultState is the sanitized vault: OpenSandbox's CredentialVaultState.
type VaultState struct {
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
// vault revision that last set it.
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

// Vault is a sandbox's Credential Vault: the document the server keeps
// sealed. Credentials and Bindings are ordered by name, each name once,
// each valid (NewVault and Apply keep them so).
type Vault struct {
	Revision    int64             `json:"revision"`
	Credentials []VaultCredential `json:"credentials"`
	Bindings    []VaultBinding    `json:"bindings"`
}

// VaultCredential is a stored credential, with its value. Its JSON has
// no value: only Vault.Document carries values.
type VaultCredential struct {
	Name       string `json:"name"`
	SourceType string `json:"sourceType"`
	Value      string `json:"-"`
	Revision   int64  `json:"revision"`
}

// String shows the credential without its value.
func (c VaultCredential) String() string {
	return fmt.Sprintf("{Name:%s SourceType:%s Revision:%d Value:<redacted>}", c.Name, c.SourceType, c.Revision)
}

// GoString is String for %#v.
func (c VaultCredential) GoString() string { return "egress.VaultCredential" + c.String() }

// LogValue logs the credential as String shows it.
func (c VaultCredential) LogValue() slog.Value { return slog.StringValue(c.String()) }

// VaultBinding is a stored binding (normalized) and the revision that
// last set it.
type VaultBinding struct {
	CredentialBinding
	Revision int64 `json:"revision"`
}

// String shows the vault without any value.
func (v *Vault) String() string {
	return fmt.Sprintf("{Revision:%d Credentials:%v Bindings:%d}", v.Revision, v.Credentials, len(v.Bindings))
}

// LogValue logs the vault as String shows it.
func (v *Vault) LogValue() slog.Value { return slog.StringValue(v.String()) }

// vaultDocument is the JSON of Vault.Document: the vault with values.
type vaultDocument struct {
	Revision    int64                `json:"revision"`
	Credentials []documentCredential `json:"credentials"`
	Bindings    []VaultBinding       `json:"bindings"`
}

type documentCredential struct {
	Name       string `json:"name"`
	SourceType string `json:"sourceType"`
	Value      string `json:"value"`
	Revision   int64  `json:"revision"`
}

// Document is the vault as the JSON document the server seals: the only
// form of a vault that carries its values (ParseVaultDocument reads it).
func (v *Vault) Document() ([]byte, error) {
	d := vaultDocument{Revision: v.Revision, Credentials: make([]documentCredential, len(v.Credentials)), Bindings: v.Bindings}
	for i, c := range v.Credentials {
		d.Credentials[i] = documentCredential(c)
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode credential vault: %w", err)
	}
	return b, nil
}

// ParseVaultDocument reads what Document made. The document is trusted
// (it comes sealed from the server's own store) but still checked for
// shape: each list ordered by name, each name once.
func ParseVaultDocument(b []byte) (*Vault, error) {
	var d vaultDocument
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, errors.New("decode credential vault: malformed document")
	}
	v := &Vault{Revision: d.Revision, Credentials: make([]VaultCredential, len(d.Credentials)), Bindings: d.Bindings}
	if v.Bindings == nil {
		v.Bindings = []VaultBinding{}
	}
	for i, c := range d.Credentials {
		v.Credentials[i] = VaultCredential(c)
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

// NewVault makes revision 1 of a vault from a create request. covered
// reports whether the sandbox's egress policy explicitly allows a binding
// host (see ExplicitlyAllowed). Errors carry codes: CodeInvalidRequest for
// what the request gets wrong; no message carries a value.
func NewVault(req VaultCreateRequest, covered func(host string) bool) (*Vault, error) {
	v := &Vault{Revision: 1, Credentials: []VaultCredential{}, Bindings: []VaultBinding{}}
	for _, c := range req.Credentials {
		vc, err := normalizeCredential(c, 1)
		if err != nil {
			return nil, err
		}
		if _, ok := v.credential(vc.Name); ok {
			return nil, invalid("credential %q is given twice", vc.Name)
		}
		v.Credentials = insertSorted(v.Credentials, vc, func(c VaultCredential) string { return c.Name })
	}
	for _, b := range req.Bindings {
		vb, err := normalizeBinding(b, 1)
		if err != nil {
			return nil, err
		}
		if _, ok := v.binding(vb.Name); ok {
			return nil, invalid("binding %q is given twice", vb.Name)
		}
		v.Bindings = insertSorted(v.Bindings, vb, func(b VaultBinding) string { return b.Name })
	}
	if err := v.check(covered); err != nil {
		return nil, err
	}
	return v, nil
}

// Apply returns the next revision of v with m applied (v is unchanged).
// With m.ExpectedRevision not v's revision it fails with
// CodeVaultRevision; a name added that exists, or replaced or deleted that
// does not, fails with sandbox.CodeConflict; the rest as NewVault.
func (v *Vault) Apply(m VaultMutation, covered func(host string) bool) (*Vault, error) {
	if m.ExpectedRevision != nil && *m.ExpectedRevision != v.Revision {
		return nil, sandbox.Errorf(CodeVaultRevision, "expectedRevision %d is not the current revision %d", *m.ExpectedRevision, v.Revision)
	}
	next := &Vault{Revision: v.Revision + 1, Credentials: slices.Clone(v.Credentials), Bindings: slices.Clone(v.Bindings)}
	if c := m.Credentials; c != nil {
		var err error
		next.Credentials, err = mutate(next.Credentials, "credential", c.Delete, c.Replace, c.Add,
			func(c VaultCredential) string { return c.Name },
			func(c Credential) (VaultCredential, error) { return normalizeCredential(c, next.Revision) })
		if err != nil {
			return nil, err
		}
	}
	if b := m.Bindings; b != nil {
		var err error
		next.Bindings, err = mutate(next.Bindings, "binding", b.Delete, b.Replace, b.Add,
			func(b VaultBinding) string { return b.Name },
			func(b CredentialBinding) (VaultBinding, error) { return normalizeBinding(b, next.Revision) })
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

func (v *Vault) credential(name string) (VaultCredential, bool) {
	i, ok := slices.BinarySearchFunc(v.Credentials, name, func(c VaultCredential, n string) int { return cmp.Compare(c.Name, n) })
	if !ok {
		return VaultCredential{}, false
	}
	return v.Credentials[i], true
}

func (v *Vault) binding(name string) (VaultBinding, bool) {
	i, ok := slices.BinarySearchFunc(v.Bindings, name, func(b VaultBinding, n string) int { return cmp.Compare(b.Name, n) })
	if !ok {
		return VaultBinding{}, false
	}
	return v.Bindings[i], true
}

// State is the sanitized vault.
func (v *Vault) State() VaultState {
	return VaultState{Revision: v.Revision, Credentials: v.CredentialList().Credentials, Bindings: v.BindingList().Bindings}
}

// CredentialList is every credential without its value.
func (v *Vault) CredentialList() CredentialList {
	out := CredentialList{Revision: v.Revision, Credentials: make([]CredentialMetadata, len(v.Credentials))}
	for i, c := range v.Credentials {
		out.Credentials[i] = CredentialMetadata{Name: c.Name, SourceType: c.SourceType, Revision: c.Revision}
	}
	return out
}

// BindingList is every binding as it is shown.
func (v *Vault) BindingList() BindingList {
	out := BindingList{Revision: v.Revision, Bindings: make([]BindingMetadata, len(v.Bindings))}
	for i, b := range v.Bindings {
		out.Bindings[i] = b.metadata()
	}
	return out
}

// CredentialMetadata is credential name without its value, or
// CodeCredentialNotFound.
func (v *Vault) CredentialMetadata(name string) (CredentialMetadata, error) {
	c, ok := v.credential(name)
	if !ok {
		return CredentialMetadata{}, sandbox.Errorf(CodeCredentialNotFound, "the vault has no credential %q", name)
	}
	return CredentialMetadata{Name: c.Name, SourceType: c.SourceType, Revision: c.Revision}, nil
}

// BindingMetadata is binding name as it is shown, or CodeBindingNotFound.
func (v *Vault) BindingMetadata(name string) (BindingMetadata, error) {
	b, ok := v.binding(name)
	if !ok {
		return BindingMetadata{}, sandbox.Errorf(CodeBindingNotFound, "the vault has no binding %q", name)
	}
	return b.metadata(), nil
}

func (b VaultBinding) metadata() BindingMetadata {
	m := b.Match
	m.Schemes, m.Ports, m.Hosts = slices.Clone(m.Schemes), slices.Clone(m.Ports), slices.Clone(m.Hosts)
	m.Methods, m.Paths = slices.Clone(m.Methods), slices.Clone(m.Paths)
	auth := &AuthMetadata{Type: b.Auth.Type}
	if b.Auth.Type == AuthAPIKey {
		auth.Name = b.Auth.Name
	}
	return BindingMetadata{Name: b.Name, Revision: b.Revision, Match: &m, Auth: auth}
}

// ProxyBindings is what the proxy applies for the vault (see
// Manager.SetBindings): each binding with the headers its auth sets, the
// credentials' values formatted.
func (v *Vault) ProxyBindings() []Binding {
	out := make([]Binding, 0, len(v.Bindings))
	for _, vb := range v.Bindings {
		value := func(name string) string {
			c, _ := v.credential(name) // check made sure it exists
			return c.Value
		}
		b := Binding{Name: vb.Name, Schemes: vb.Match.Schemes, Ports: vb.Match.Ports, Hosts: vb.Match.Hosts,
			Methods: vb.Match.Methods, Paths: vb.Match.Paths}
		switch a := vb.Auth; a.Type {
		case AuthBearer:
			b.Headers = []BindingHeader{{Name: "Authorization", Value: "Bearer " + value(a.Credential)}}
		case AuthBasic:
			b.Headers = []BindingHeader{{Name: "Authorization", Value: "Basic " + value(a.Credential)}}
		case AuthAPIKey:
			b.Headers = []BindingHeader{{Name: a.Name, Value: value(a.Credential)}}
		case AuthCustomHeaders:
			for _, h := range a.Headers {
				b.Headers = append(b.Headers, BindingHeader{Name: h.Name, Value: value(h.Credential)})
			}
		}
		out = append(out, b)
	}
	return out
}
