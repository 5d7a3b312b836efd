package exactbody

import (
	"errors"
	"io"
	"strings"
	"testing"
)

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

func TestWrap(t *testing.T) {
	// The whole body comes through, and reads past it never reach the
	// inbound body.
	b := Wrap(&strictReader{r: strings.NewReader("0123456789")}, 10)
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
	short := Wrap(io.NopCloser(strings.NewReader("abc")), 10).(*body)
	if got, err := io.ReadAll(short); string(got) != "abc" || err != nil || short.left != 7 {
		t.Fatalf("short body: %q, %v, %d left", got, err, short.left)
	}
}
