package egress

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func TestScrubHeaders(t *testing.T) {
	secrets := []Secret{{Name: "gh", Placeholder: "abx-secret-0001", Value: "ghp_realvalue123"}, {Name: "short", Placeholder: "p", Value: "abc"}}
	bindings := []Binding{{Name: "api", Headers: []BindingHeader{{Name: "Authorization", Value: "Bearer sk-live-7777777"}}}}
	for _, tt := range []struct {
		name  string
		in    http.Header
		want  http.Header
		count int
	}{
		{"nothing to scrub", http.Header{"X-A": {"plain"}}, http.Header{"X-A": {"plain"}}, 0},
		{"a secret's value becomes its placeholder",
			http.Header{"X-Echo": {"token ghp_realvalue123 seen"}}, http.Header{"X-Echo": {"token abx-secret-0001 seen"}}, 1},
		{"a binding's whole header value",
			http.Header{"X-Echo-Auth": {"Bearer sk-live-7777777"}}, http.Header{"X-Echo-Auth": {withheldMark}}, 1},
		{"a binding's token alone",
			http.Header{"X-Token": {"sk-live-7777777"}}, http.Header{"X-Token": {withheldMark}}, 1},
		{"values shorter than the bound stay", http.Header{"X-A": {"abc abc"}}, http.Header{"X-A": {"abc abc"}}, 0},
		{"every value of a header",
			http.Header{"Set-Cookie": {"a=ghp_realvalue123", "b=1"}}, http.Header{"Set-Cookie": {"a=abx-secret-0001", "b=1"}}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if n := newScrubber(secrets, bindings).headers(tt.in); n != tt.count {
				t.Errorf("changed %d values, want %d", n, tt.count)
			}
			for k, vs := range tt.want {
				for i, v := range vs {
					if tt.in[k][i] != v {
						t.Errorf("%s[%d] = %q, want %q", k, i, tt.in[k][i], v)
					}
				}
			}
		})
	}
}

// scrubSecrets are the credentials of the body tests: one a prefix of
// another's, so that the longest one at a position must win.
var scrubSecrets = []Secret{
	{Name: "a", Placeholder: "PH-A", Value: "sk-live-0123456789"},
	{Name: "b", Placeholder: "PH-B", Value: "sk-live-0123456789-extended"},
}

func TestScrubBody(t *testing.T) {
	s := newScrubber(scrubSecrets, []Binding{{Name: "api", Headers: []BindingHeader{{Name: "Authorization", Value: "Bearer tok-9876543210"}}}})
	for _, tt := range []struct{ name, in, want string }{
		{"nothing", "plain text", "plain text"},
		{"one", `{"key":"sk-live-0123456789"}`, `{"key":"PH-A"}`},
		{"the longest at a position", "sk-live-0123456789-extended!", "PH-B!"},
		{"a binding's token", "auth was tok-9876543210.", "auth was " + withheldMark + "."},
		{"a binding's whole value", "Bearer tok-9876543210", withheldMark},
		{"adjacent", "sk-live-0123456789sk-live-0123456789", "PH-APH-A"},
		{"at the very end", "x sk-live-0123456789", "x PH-A"},
		{"a prefix alone stays", "sk-live-01234", "sk-live-01234"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := s.replace([]byte(tt.in)); string(got) != tt.want {
				t.Fatalf("replace: %q, want %q", got, tt.want)
			}
			// Streamed, whichever way the body is cut into reads.
			for _, cut := range []func(io.Reader) io.Reader{
				func(r io.Reader) io.Reader { return r },
				iotest.OneByteReader,
				iotest.HalfReader,
				iotest.DataErrReader,
			} {
				n := -1
				got, err := io.ReadAll(s.body(io.NopCloser(cut(strings.NewReader(tt.in))), func(k int) { n = k }))
				if err != nil || string(got) != tt.want {
					t.Fatalf("streamed: %q, %v; want %q", got, err, tt.want)
				}
				if n < 0 {
					t.Fatal("the count was not reported at the body's end")
				}
			}
		})
	}
}

// FuzzScrubStream: a body streamed in reads of any sizes comes out as the
// whole body replaced at once, and holds no credential the whole one does
// not.
func FuzzScrubStream(f *testing.F) {
	f.Add([]byte("a sk-live-0123456789 b sk-live-0123456789-extended c"), []byte{3, 7, 1})
	f.Add([]byte("sk-live-0123456789"), []byte{1})
	f.Add([]byte(""), []byte{})
	s := newScrubber(scrubSecrets, nil)
	f.Fuzz(func(t *testing.T, body, cuts []byte) {
		want, _ := s.replace(body)
		got, err := io.ReadAll(s.body(io.NopCloser(&cutReader{data: body, cuts: cuts}), nil))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("streamed %q, whole %q", got, want)
		}
	})
}

// cutReader returns data in reads of the sizes cuts lists (cyclically;
// 0 counts as 1).
type cutReader struct {
	data []byte
	cuts []byte
	i    int
}

func (r *cutReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(r.cuts) > 0 {
		n = max(1, int(r.cuts[r.i%len(r.cuts)]))
		r.i++
	}
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func TestScrubResponse(t *testing.T) {
	s := newScrubber(scrubSecrets, nil)
	gz := func(text string) string {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(text))
		w.Close()
		return b.String()
	}
	for _, tt := range []struct {
		name     string
		method   string
		proto    string // of the box's request
		status   int
		encoding string
		body     string
		wantBody string
		wantErr  bool
		chunked  bool
	}{
		{name: "a known length is kept right", status: 200, body: "v=sk-live-0123456789", wantBody: "v=PH-A"},
		{name: "a long body streams", status: 200, body: strings.Repeat("x", scrubWholeMax) + "sk-live-0123456789",
			wantBody: strings.Repeat("x", scrubWholeMax) + "PH-A", chunked: true},
		{name: "gzip is decoded", status: 200, encoding: "gzip", body: gz("v=sk-live-0123456789"), wantBody: "v=PH-A", chunked: true},
		{name: "an unknown coding is refused", status: 200, encoding: "br", body: "\x00\x01", wantErr: true},
		{name: "HTTP/1.0 ends with the connection", proto: "HTTP/1.0", status: 200, encoding: "gzip", body: gz("sk-live-0123456789"), wantBody: "PH-A"},
		{name: "HEAD has no body", method: "HEAD", status: 200, encoding: "br"},
		{name: "304 has no body", status: 304, encoding: "br"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(cmp.Or(tt.method, "GET"), "http://example.test/", nil)
			if tt.proto == "HTTP/1.0" {
				req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/1.0", 1, 0
			}
			resp := &http.Response{StatusCode: tt.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: req,
				Header: http.Header{"Content-Length": {strconv.Itoa(len(tt.body))}}, ContentLength: int64(len(tt.body)),
				Body: io.NopCloser(strings.NewReader(tt.body))}
			if tt.encoding != "" {
				resp.Header.Set("Content-Encoding", tt.encoding)
			}
			err := s.scrubResponse(resp, func(int, int) {})
			if tt.wantErr {
				var bu bodyUnscrubbable
				if !errors.As(err, &bu) {
					t.Fatalf("scrubResponse: %v, want bodyUnscrubbable", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var wire bytes.Buffer
			if err := resp.Write(&wire); err != nil {
				t.Fatal(err)
			}
			back, err := http.ReadResponse(bufio.NewReader(&wire), req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(back.Body)
			if string(got) != tt.wantBody {
				t.Fatalf("the box reads %q, want %q", got, tt.wantBody)
			}
			if isChunked := slices.Contains(back.TransferEncoding, "chunked"); isChunked != tt.chunked {
				t.Fatalf("chunked %v, want %v", isChunked, tt.chunked)
			}
			if !tt.chunked && tt.proto == "" && tt.wantBody != "" && back.ContentLength != int64(len(tt.wantBody)) {
				t.Fatalf("Content-Length %d, want %d", back.ContentLength, len(tt.wantBody))
			}
			if tt.wantBody != "" && back.Header.Get("Content-Encoding") != "" {
				t.Fatal("a decoded body kept its Content-Encoding")
			}
		})
	}
}

// BenchmarkScrubBody: a body with no credential, streamed through the
// scrubber, against reading it plainly.
func BenchmarkScrubBody(b *testing.B) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<20) // 64 MiB
	s := newScrubber(scrubSecrets, []Binding{{Name: "api", Headers: []BindingHeader{{Name: "Authorization", Value: "Bearer tok-9876543210"}}}})
	for _, tt := range []struct {
		name string
		r    func() io.Reader
	}{
		{"plain", func() io.Reader { return bytes.NewReader(data) }},
		{"scrubbed", func() io.Reader { return s.body(io.NopCloser(bytes.NewReader(data)), nil) }},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			buf := make([]byte, 32<<10)
			for b.Loop() {
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{tt.r()}, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
