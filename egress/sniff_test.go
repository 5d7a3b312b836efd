package egress

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/astrabox/astrabox/egress/internal/syntax"
)

// recordConn captures what a client writes; reads end at once.
type recordConn struct {
	net.Conn
	buf bytes.Buffer
}

func (c *recordConn) Write(p []byte) (int, error)      { return c.buf.Write(p) }
func (c *recordConn) Read(p []byte) (int, error)       { return 0, io.EOF }
func (c *recordConn) Close() error                     { return nil }
func (c *recordConn) SetDeadline(time.Time) error      { return nil }
func (c *recordConn) SetWriteDeadline(time.Time) error { return nil }
func (c *recordConn) SetReadDeadline(time.Time) error  { return nil }

// clientHello returns the ClientHello crypto/tls sends for serverName.
func clientHello(t testing.TB, serverName string) []byte {
	t.Helper()
	rc := &recordConn{}
	_ = tls.Client(rc, &tls.Config{ServerName: serverName, InsecureSkipVerify: true}).Handshake()
	if rc.buf.Len() == 0 {
		t.Fatal("no ClientHello written")
	}
	return rc.buf.Bytes()
}

// splitRecords re-frames a one-record hello into records of at most n
// handshake bytes each, as a client may.
func splitRecords(hello []byte, n int) []byte {
	body := hello[5:]
	var out []byte
	for len(body) > 0 {
		k := min(n, len(body))
		out = append(out, 0x16, 3, 1, byte(k>>8), byte(k))
		out = append(out, body[:k]...)
		body = body[k:]
	}
	return out
}

func TestClientHelloSNI(t *testing.T) {
	hello := clientHello(t, "API.Example.com")
	if got, err := clientHelloSNI(hello); err != nil || got != "API.Example.com" {
		t.Fatalf("clientHelloSNI = %q, %v", got, err)
	}
	split := splitRecords(hello, 100)
	if got, err := clientHelloSNI(split); err != nil || got != "API.Example.com" {
		t.Fatalf("clientHelloSNI of a hello in records of 100 bytes = %q, %v", got, err)
	}
	for _, cut := range []int{1, 4, 5, 40, len(split) - 1} {
		if _, err := clientHelloSNI(split[:cut]); err != errNeedMore {
			t.Errorf("clientHelloSNI of %d bytes: %v, want errNeedMore", cut, err)
		}
	}
	noSNI := clientHello(t, "192.0.2.1") // an IP: crypto/tls sends no server name
	if got, err := clientHelloSNI(noSNI); err != nil || got != "" {
		t.Fatalf("clientHelloSNI without SNI = %q, %v", got, err)
	}
	for _, bad := range [][]byte{
		{0x16, 3, 1, 0, 0},
		{0x17, 3, 3, 0, 1, 0},
		{0x16, 3, 1, 0, 4, 2, 0, 0, 0}, // a server hello
	} {
		if _, err := clientHelloSNI(bad); err != errMalformed {
			t.Errorf("clientHelloSNI(%x) = %v, want errMalformed", bad, err)
		}
	}
}

func TestClassifyAndHTTPHead(t *testing.T) {
	for in, want := range map[string]protocol{
		"GET / HTTP/1.1\r\n": protoHTTP, "POS": protoHTTP, "\x16\x03\x01": protoTLS,
		"SSH-2.0-OpenSSH\r\n": protoOther, "get / HTTP/1.1": protoOther, "ABCDEFGHIJKLMNOPQRS": protoOther,
	} {
		if got := classify([]byte(in)); got != want {
			t.Errorf("classify(%q) = %v, want %v", in, got, want)
		}
	}
	h, err := readHTTPHead([]byte("GET /x HTTP/1.1\r\nHost: Files.Test:8080\r\n\r\nbody"))
	if err != nil || h.req.Host != "Files.Test:8080" || h.n != 42 {
		t.Fatalf("readHTTPHead = %+v, %v", h, err)
	}
	if _, err := readHTTPHead([]byte("GET /x HTTP/1.1\r\nHost: a")); err != errNeedMore {
		t.Fatalf("partial head: %v", err)
	}
	if _, err := readHTTPHead([]byte("GET\r\n\r\n")); err != errMalformed {
		t.Fatalf("bad head: %v", err)
	}
	for in, want := range map[string]string{"files.test:80": "files.test", "[2001:db8::1]:80": "", "192.0.2.1": "", "FILES.test.": "files.test"} {
		name, _, ok := hostName(in)
		if !ok || name != want {
			t.Errorf("hostName(%q) = %q, %v", in, name, ok)
		}
	}
}

func FuzzClientHelloSNI(f *testing.F) {
	hello := clientHello(f, "fuzz.example.com")
	f.Add(hello)
	f.Add(splitRecords(hello, 7))
	f.Add([]byte{0x16, 3, 1, 0, 1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		name, err := clientHelloSNI(b)
		if err == nil && name != "" {
			if _, ok := syntax.HostName(name); !ok {
				t.Fatalf("accepted server name %q is not a host name", name)
			}
		}
	})
}

func FuzzReadHTTPHead(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"))
	f.Add([]byte("CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n"))
	f.Add([]byte("GET http://b.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = classify(b)
		h, err := readHTTPHead(b)
		if err == nil {
			if h.n > len(b) {
				t.Fatalf("head of %d bytes in %d", h.n, len(b))
			}
			_, _, _ = hostName(h.req.Host)
		}
	})
}
