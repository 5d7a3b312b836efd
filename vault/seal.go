// Package vault seals secrets with AES-256-GCM under the server's master
// keys. A sealed value names the key that sealed it, so keys rotate without
// a flag day: the key file lists keys newest first, Seal always uses the
// first, and Open uses whichever key a value names.
package vault

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// prefix starts every sealed value: format version 1.
const prefix = "sealed:v1:"

// ErrNoKey is returned by Open for a value sealed under a key the ring does
// not hold.
var ErrNoKey = errors.New("vault: sealed under a key this server does not have")

// Ring holds the master keys. The zero Ring holds none; use Load or New.
type Ring struct {
	keys []key // newest first
}

type key struct {
	id   string // first 8 bytes of the key's SHA-256, hex
	aead cipher.AEAD
	raw  []byte
}

func (k key) derive(purpose string) []byte {
	m := hmac.New(sha256.New, k.raw)
	m.Write([]byte("astrabox derived key v1\x00" + purpose))
	return m.Sum(nil)
}

// New returns a ring of raw 32-byte keys, newest first.
func New(raw ...[]byte) (*Ring, error) {
	r := &Ring{}
	for i, k := range raw {
		if len(k) != 32 {
			return nil, fmt.Errorf("vault: key %d is %d bytes, want 32", i+1, len(k))
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("vault: key %d: %w", i+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("vault: key %d: %w", i+1, err)
		}
		sum := sha256.Sum256(k)
		r.keys = append(r.keys, key{id: hex.EncodeToString(sum[:8]), aead: aead, raw: append([]byte(nil), k...)})
	}
	if len(r.keys) == 0 {
		return nil, errors.New("vault: no key")
	}
	return r, nil
}

// LoadOrCreate reads the key file at path (one hex-encoded 32-byte key per
// line, newest first; blank lines and lines starting with # are skipped).
// When the file does not exist it generates a key and writes the file with
// mode 0600, refusing to overwrite a file created meanwhile. It refuses a
// file readable by group or others.
func LoadOrCreate(path string) (*Ring, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		var k [32]byte
		if _, err := rand.Read(k[:]); err != nil {
			return nil, fmt.Errorf("vault: generate master key: %w", err)
		}
		content := "# AstraBox master keys, newest first (see docs/vault.md)\n" + hex.EncodeToString(k[:]) + "\n"
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			if errors.Is(err, os.ErrExist) {
				return LoadOrCreate(path)
			}
			return nil, fmt.Errorf("vault: create master key file: %w", err)
		}
		if _, err := f.WriteString(content); err != nil {
			f.Close()
			return nil, fmt.Errorf("vault: write master key file: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("vault: write master key file: %w", err)
		}
		return New(k[:])
	}
	if err != nil {
		return nil, fmt.Errorf("vault: read master key file: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("vault: master key file %s is accessible by group or others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	var raw [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		k, err := hex.DecodeString(t)
		if err != nil || len(k) != 32 {
			return nil, fmt.Errorf("vault: master key file line %d: not a hex-encoded 32-byte key", line)
		}
		raw = append(raw, k)
	}
	return New(raw...)
}

// Seal encrypts plaintext under the newest key. aad binds the value to its
// place (for example "profile:py:model.api_key"): Open with another aad
// fails, so a sealed value cannot be moved to another record.
func (r *Ring) Seal(plaintext []byte, aad string) (string, error) {
	k := r.keys[0]
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("vault: nonce: %w", err)
	}
	ct := k.aead.Seal(nonce, nonce, plaintext, []byte(aad))
	return prefix + k.id + ":" + base64.RawStdEncoding.EncodeToString(ct), nil
}

// Open decrypts a value Seal returned with the same aad.
func (r *Ring) Open(sealed, aad string) ([]byte, error) {
	rest, ok := strings.CutPrefix(sealed, prefix)
	if !ok {
		return nil, errors.New("vault: not a sealed value")
	}
	id, body, ok := strings.Cut(rest, ":")
	if !ok {
		return nil, errors.New("vault: malformed sealed value")
	}
	ct, err := base64.RawStdEncoding.DecodeString(body)
	if err != nil {
		return nil, errors.New("vault: malformed sealed value")
	}
	for _, k := range r.keys {
		if k.id != id {
			continue
		}
		n := k.aead.NonceSize()
		if len(ct) < n {
			return nil, errors.New("vault: malformed sealed value")
		}
		pt, err := k.aead.Open(nil, ct[:n], ct[n:], []byte(aad))
		if err != nil {
			return nil, errors.New("vault: sealed value does not open (tampered, or sealed for another record)")
		}
		return pt, nil
	}
	return nil, ErrNoKey
}

// IsSealed reports whether s looks like a value Seal returned.
func IsSealed(s string) bool { return strings.HasPrefix(s, prefix) }

// NeedsReseal reports whether a sealed value is under an older key than
// the newest (so a rotation should re-seal it).
func (r *Ring) NeedsReseal(sealed string) bool {
	rest, ok := strings.CutPrefix(sealed, prefix)
	if !ok {
		return false
	}
	id, _, _ := strings.Cut(rest, ":")
	return id != r.keys[0].id
}

// Derive returns a 32-byte key for purpose (e.g. "proxy-signing"), the
// HMAC-SHA256 of purpose under the newest master key: every server with
// the same key file derives the same key, so replicas share it without
// storing it. A rotation changes it.
func (r *Ring) Derive(purpose string) []byte {
	return r.keys[0].derive(purpose)
}
