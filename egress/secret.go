package egress

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/astrabox/astrabox/egress/internal/syntax"
)

// Limits of a Secret's fields (see Validate).
const (
	MaxSecretValue  = 16 << 10
	maxSecretFormat = 1024
	maxPathPrefix   = 1024
)

// String shows the secret without its value or placeholder (for %v and
// %+v), so that printing one by mistake leaks nothing.
func (s Secret) String() string {
	return fmt.Sprintf("{Name:%s Host:%s PathPrefix:%s Header:%s Format:%s Value:<redacted>}", s.Name, s.Host, s.PathPrefix, s.Header, s.Format)
}

// GoString is String for %#v.
func (s Secret) GoString() string { return "egress.Secret" + s.String() }

// LogValue logs the secret as String shows it.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Canonical returns s with its destination in the form Validate accepts
// and Inject compares: the host in lower case without a trailing dot, the
// header canonical (default Authorization), the format defaulted
// ("Bearer {value}" for Authorization, "{value}" otherwise).
func (s Secret) Canonical() Secret {
	s.Host = strings.ToLower(strings.TrimSuffix(s.Host, "."))
	if s.Header == "" {
		s.Header = "Authorization"
	}
	s.Header = http.CanonicalHeaderKey(s.Header)
	if s.Format == "" {
		s.Format = "{value}"
		if s.Header == "Authorization" {
			s.Format = "Bearer {value}"
		}
	}
	return s
}

// Validate checks a secret's destination and value: Host an exact domain
// name or "*." and a domain of two labels or more (no address, no port), PathPrefix empty or an
// absolute path, Header a header name that does not frame the request,
// Format holding "{value}", and Value (when set) and the formatted value
// valid header text (no control characters but tab). Placeholder and Name
// are the caller's. Messages name the field and never carry the value.
func (s Secret) Validate() error {
	host, wild := strings.CutPrefix(s.Host, "*.")
	if _, ok := syntax.HostName(host); !ok || strings.Contains(host, "*") {
		return fmt.Errorf("host %q is not a domain name or a wildcard domain (*.example.com)", s.Host)
	}
	if wild && !strings.Contains(host, ".") {
		return fmt.Errorf("host %q: a wildcard needs a domain of two labels or more", s.Host)
	}
	if s.PathPrefix != "" && (!syntax.PlainPath(s.PathPrefix) || len(s.PathPrefix) > maxPathPrefix || syntax.HasControl(s.PathPrefix) ||
		strings.ContainsAny(s.PathPrefix, "?#")) {
		return fmt.Errorf("path_prefix %q must be an absolute path without dot segments (at most %d bytes, no query)", s.PathPrefix, maxPathPrefix)
	}
	if s.Header != "" && !httpguts.ValidHeaderFieldName(s.Header) {
		return fmt.Errorf("header %q is not a valid header name", s.Header)
	}
	if syntax.FramingHeader(http.CanonicalHeaderKey(s.Header)) {
		return fmt.Errorf("header %s frames the request and cannot carry a secret", http.CanonicalHeaderKey(s.Header))
	}
	if s.Format != "" && (!strings.Contains(s.Format, "{value}") || len(s.Format) > maxSecretFormat || syntax.HasControl(s.Format)) {
		return fmt.Errorf("format must hold {value} (at most %d bytes, no control characters)", maxSecretFormat)
	}
	if s.Value != "" {
		if len(s.Value) > MaxSecretValue {
			return fmt.Errorf("value exceeds %d bytes", MaxSecretValue)
		}
		if syntax.HasControl(s.Value) || !httpguts.ValidHeaderFieldValue(s.Value) {
			return errors.New("value must be header text: no control characters but tab")
		}
	}
	return nil
}

// Holds reports whether h presents the secret's placeholder the way its
// format presents the value (e.g. "Authorization: Bearer <placeholder>"):
// how a holder of the placeholder proves it, as the model path checks a
// session's credential.
func (s Secret) Holds(h http.Header) bool {
	c := s.Canonical()
	return s.Placeholder != "" && h.Get(c.Header) == strings.ReplaceAll(c.Format, "{value}", s.Placeholder)
}
