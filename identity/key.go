package identity

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"strings"
)

// KeyPrefix starts every per-user API key: "abx_<id>_<secret>".
const KeyPrefix = "abx_"

// The lengths of a key's id and secret, in characters of keyAlphabet: 60
// and 260 random bits.
const (
	keyIDLen     = 12
	keySecretLen = 52
)

// keyEncoding writes random bytes in lowercase base32 without padding: no
// character that needs escaping in a header, a URL or a shell.
var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewKey makes a key: its id (the record's id, shown in listings), its
// full text (shown once) and the SHA-256 of its secret (stored).
func NewKey() (id, key string, secretHash [32]byte) {
	id = randomString(keyIDLen)
	secret := randomString(keySecretLen)
	return id, KeyPrefix + id + "_" + secret, HashSecret(secret)
}

// randomString returns n random characters of keyEncoding's alphabet.
func randomString(n int) string {
	b := make([]byte, (n*5+7)/8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return keyEncoding.EncodeToString(b)[:n]
}

// ParseKey splits a per-user key into its id and secret; ok is false for
// anything that is not exactly "abx_<id>_<secret>" with an id and a
// secret of their lengths in lowercase base32.
func ParseKey(key string) (id, secret string, ok bool) {
	rest, found := strings.CutPrefix(key, KeyPrefix)
	if !found {
		return "", "", false
	}
	id, secret, found = strings.Cut(rest, "_")
	if !found || len(id) != keyIDLen || len(secret) != keySecretLen || !inAlphabet(id) || !inAlphabet(secret) {
		return "", "", false
	}
	return id, secret, true
}

// IsKeyID reports whether s has the form of a key id.
func IsKeyID(s string) bool { return len(s) == keyIDLen && inAlphabet(s) }

func inAlphabet(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// HashSecret returns the SHA-256 that is stored of a key's secret.
func HashSecret(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }
