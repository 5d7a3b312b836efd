package identity

import (
	"strings"
	"testing"
)

func TestNewKeyParses(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id, key, hash := NewKey()
		gotID, secret, ok := ParseKey(key)
		if !ok || gotID != id || HashSecret(secret) != hash || !IsKeyID(id) {
			t.Fatalf("NewKey() = %q, %q: parsed as %q, %q, %v", id, key, gotID, secret, ok)
		}
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
	}
}

func TestParseKeyRefuses(t *testing.T) {
	_, good, _ := NewKey()
	id, secret, _ := ParseKey(good)
	for _, tc := range []struct{ name, key string }{
		{"empty", ""},
		{"bootstrap-like", "c2VjcmV0LWtleQ"},
		{"no prefix", id + "_" + secret},
		{"uppercase prefix", "ABX_" + id + "_" + secret},
		{"no separator", KeyPrefix + id + secret},
		{"short id", KeyPrefix + id[1:] + "_" + secret},
		{"long secret", KeyPrefix + id + "_" + secret + "a"},
		{"uppercase secret", KeyPrefix + id + "_" + strings.ToUpper(secret)},
		{"base32 digit out of alphabet", KeyPrefix + id + "_" + "1" + secret[1:]},
		{"extra separator", KeyPrefix + id + "_" + secret[:10] + "_" + secret[11:]},
		{"trailing space", good + " "},
		{"NUL", good[:len(good)-1] + "\x00"},
	} {
		if _, _, ok := ParseKey(tc.key); ok {
			t.Errorf("%s: ParseKey(%q) accepted", tc.name, tc.key)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	_, good, _ := NewKey()
	f.Add(good)
	f.Add("abx__")
	f.Add("abx_aaaaaaaaaaaa_")
	f.Fuzz(func(t *testing.T, key string) {
		id, secret, ok := ParseKey(key)
		if !ok {
			return
		}
		if KeyPrefix+id+"_"+secret != key || !IsKeyID(id) || len(secret) != keySecretLen || !inAlphabet(secret) {
			t.Fatalf("ParseKey(%q) = %q, %q: not the key's parts", key, id, secret)
		}
	})
}

func TestIntersect(t *testing.T) {
	for _, tc := range []struct {
		role Role
		key  []Scope
		want []Scope
	}{
		{RoleAdmin, []Scope{ScopeAdmin, ScopeRead}, []Scope{ScopeRead, ScopeAdmin}},
		{RoleMember, []Scope{ScopeAdmin, ScopeRead, ScopeWrite}, []Scope{ScopeRead, ScopeWrite}},
		{RoleViewer, []Scope{ScopeWrite}, []Scope{}},
		{Role("root"), []Scope{ScopeRead}, []Scope{}},
	} {
		got := Intersect(tc.key, RoleScopes(tc.role))
		if len(got) != len(tc.want) {
			t.Errorf("%s ∩ %v = %v, want %v", tc.role, tc.key, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s ∩ %v = %v, want %v", tc.role, tc.key, got, tc.want)
			}
		}
	}
}
