package trust

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// CA is the per-server certificate authority the proxy signs the
// certificates with that it presents when it terminates a box's TLS for
// protected delivery and credential proxy bindings. Boxes that get
// secrets, and boxes created with a credential proxy, trust it (see
// Install and Env); nothing else does. Its key never leaves the server. A
// CA is safe for concurrent use.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// Files of a CA directory.
const (
	caCertFile = "egress-ca.pem"
	caKeyFile  = "egress-ca-key.pem"
)

// leafLifetime is how long a presented certificate is valid.
const leafLifetime = 7 * 24 * time.Hour

// LoadOrCreateCA reads the CA kept in dir, or makes one there (the key
// with mode 0600).
func LoadOrCreateCA(dir string) (*CA, error) {
	certPEM, err1 := os.ReadFile(filepath.Join(dir, caCertFile))
	keyPEM, err2 := os.ReadFile(filepath.Join(dir, caKeyFile))
	if err1 == nil && err2 == nil {
		return parseCA(certPEM, keyPEM)
	}
	if !errors.Is(err1, os.ErrNotExist) && err1 != nil {
		return nil, fmt.Errorf("egress CA: %w", err1)
	}
	ca, keyPEM, err := NewCA()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, caKeyFile), keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, caCertFile), ca.certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	return ca, nil
}

// NewCA makes a new CA and returns it with its key in PEM.
func NewCA() (*CA, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("egress CA key: %w", err)
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "AstraBox egress CA", Organization: []string{"AstraBox"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("egress CA: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("egress CA: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	ca, err := parseCA(certPEM, keyPEM)
	return ca, keyPEM, err
}

func parseCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("egress CA: not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("egress CA key: %w", err)
	}
	return &CA{cert: cert, certPEM: certPEM, key: key, leaves: map[string]*tls.Certificate{}}, nil
}

// CertPEM is the CA certificate, for boxes' trust stores.
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// Leaf returns a certificate for name signed by the CA, made once per
// name and renewed when half its life is gone; its chain holds the CA.
func (ca *CA) Leaf(name string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c := ca.leaves[name]; c != nil && time.Until(c.Leaf.NotAfter) > leafLifetime/2 {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if len(ca.leaves) > 4096 {
		ca.leaves = map[string]*tls.Certificate{}
	}
	c := &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key, Leaf: leaf}
	ca.leaves[name] = c
	return c, nil
}
