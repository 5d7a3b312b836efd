package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// shipyardConfig is the "shipyard" section of the config file: extras of
// the Shipyard Neo (Bay) compatible API, which the server always serves
// under /shipyard (api/shipyard):
//
//	"shipyard": {"listen": "127.0.0.1:8114", "credentials": "/var/lib/astrabox/shipyard/credentials.json"}
type shipyardConfig struct {
	// Listen, when set, serves the same routes at the root of a second
	// address, as Bay does (its conventional port is 8114), for clients
	// configured with Bay's default endpoint.
	Listen string `json:"listen"`
	// Credentials, when set, is a file written at every start with Bay's
	// credentials.json, {"api_key", "endpoint"} (mode 0600), so that a
	// co-located AstrBot finds the key by itself. The key must be known in
	// plain: from --api-key, ASTRABOX_API_KEY or DATA_DIR/credentials.
	Credentials string `json:"credentials"`
}

func (c shipyardConfig) validate() error {
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return fmt.Errorf("shipyard.listen %q: want host:port", c.Listen)
		}
	}
	if c.Credentials != "" && !filepath.IsAbs(c.Credentials) {
		return fmt.Errorf("shipyard.credentials %q: want an absolute path", c.Credentials)
	}
	return nil
}

// serveShipyard starts the extras of cfg beside the main listener at
// mainAddr: the second listener (closed when the returned stop runs) and
// the credentials file. key is the plain API key ("" when unknown).
func serveShipyard(cfg shipyardConfig, handler http.Handler, mainAddr, key, dataDir string, log *slog.Logger) (stop func(), err error) {
	stop = func() {}
	endpoint := "http://" + mainAddr + "/shipyard"
	if cfg.Listen != "" {
		l, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return stop, fmt.Errorf("shipyard listen: %w", err)
		}
		hs := &http.Server{Handler: atRoot(handler), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
		go func() {
			if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Warn("shipyard listener", "err", err)
			}
		}()
		stop = func() { _ = hs.Close() }
		endpoint = "http://" + l.Addr().String()
		log.Info("serving the Shipyard (Bay) API", "addr", l.Addr().String())
	}
	if cfg.Credentials != "" {
		if key == "" {
			if b, err := os.ReadFile(filepath.Join(dataDir, "credentials")); err == nil {
				key = strings.TrimSpace(string(b))
			}
		}
		if key == "" {
			log.Warn("shipyard.credentials: the API key is not known in plain (pass --api-key or keep DATA_DIR/credentials); not written")
			return stop, nil
		}
		b, _ := json.MarshalIndent(map[string]string{"api_key": key, "endpoint": endpoint}, "", "  ")
		if err := os.MkdirAll(filepath.Dir(cfg.Credentials), 0o700); err != nil {
			return stop, fmt.Errorf("shipyard credentials: %w", err)
		}
		if err := writeFileAtomic(cfg.Credentials, append(b, '\n'), 0o600); err != nil {
			return stop, fmt.Errorf("shipyard credentials: %w", err)
		}
	}
	return stop, nil
}

// atRoot serves Bay's routes at the root by handing h (the whole API,
// which adds request ids and body deadlines) the path under /shipyard.
func atRoot(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/shipyard" + r.URL.Path
		if r.URL.RawPath != "" {
			r2.URL.RawPath = "/shipyard" + r.URL.RawPath
		}
		h.ServeHTTP(w, r2)
	})
}

// writeFileAtomic writes b to path through a temporary file and a rename.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
