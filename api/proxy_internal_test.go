package api

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

func TestParseExpires(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		in   string
		want time.Time // zero: refused
	}{
		// A lifetime in seconds (AstraBox's form).
		{"1", now.Add(time.Second)},
		{"3600", now.Add(time.Hour)},
		{"604800", now.Add(7 * 24 * time.Hour)},
		// Unix epoch seconds (the specification's form, what the SDKs'
		// getSignedEndpoint sends).
		{"1800003600", time.Unix(1_800_003_600, 0)},
		{"1800604800", time.Unix(1_800_604_800, 0)},
		// Refused: not in the future, more than 7 days ahead, not a count.
		{"1800000000", time.Time{}},
		{"1799999999", time.Time{}},
		{"604801", time.Time{}},
		{"1800604801", time.Time{}},
		{"0", time.Time{}},
		{"-5", time.Time{}},
		{"soon", time.Time{}},
		{"18446744073709551615", time.Time{}},
	}
	for _, tt := range tests {
		got, err := parseExpires(tt.in, now)
		if tt.want.IsZero() {
			if sandbox.CodeOf(err) != sandbox.CodeInvalidRequest {
				t.Errorf("parseExpires(%q) = %v, %v; want %s", tt.in, got, err, sandbox.CodeInvalidRequest)
			}
			continue
		}
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("parseExpires(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

// strictReader fails any read after its content is used up, as a request
// body the server has closed does.
type strictReader struct {
	r    io.Reader
	done bool
}

func (s *strictReader) Read(p []byte) (int, error) {
	if s.done {
		return 0, errors.New("read past the end")
	}
	n, err := s.r.Read(p)
	if err == io.EOF {
		s.done = true
	}
	return n, err
}

func (s *strictReader) Close() error { return nil }

func TestExactBody(t *testing.T) {
	// The whole body comes through, and reads past it never reach the
	// inbound body.
	b := &exactBody{ReadCloser: &strictReader{r: strings.NewReader("0123456789")}, left: 10}
	var got []byte
	buf := make([]byte, 4)
	for {
		n, err := b.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
	}
	if string(got) != "0123456789" {
		t.Fatalf("read %q", got)
	}
	for range 3 {
		if n, err := b.Read(buf); n != 0 || err != io.EOF {
			t.Fatalf("read past the end: %d, %v", n, err)
		}
	}

	// A body shorter than declared stays short: the transport then
	// refuses it (ContentLength mismatch) rather than sending it as whole.
	short := &exactBody{ReadCloser: io.NopCloser(strings.NewReader("abc")), left: 10}
	if got, err := io.ReadAll(short); string(got) != "abc" || err != nil || short.left != 7 {
		t.Fatalf("short body: %q, %v, %d left", got, err, short.left)
	}
}
