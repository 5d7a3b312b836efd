package egress

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/astrabox/astrabox/sandbox"
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

// encodedValue is a secret value with bytes that every covered encoding
// writes differently.
const encodedValue = "sk/live+0123=4567 (x)~"

// testEncodings are the encodings of a value that scrubbing covers, as
// common encoders write them.
var testEncodings = []struct {
	name string
	enc  func(string) string
}{
	{"raw", func(v string) string { return v }},
	{"JSON with escaped slashes", func(v string) string { return strings.ReplaceAll(v, "/", `\/`) }},
	{"base64", func(v string) string { return base64.StdEncoding.EncodeToString([]byte(v)) }},
	{"base64 unpadded", func(v string) string { return base64.RawStdEncoding.EncodeToString([]byte(v)) }},
	{"base64url", func(v string) string { return base64.URLEncoding.EncodeToString([]byte(v)) }},
	{"base64url unpadded", func(v string) string { return base64.RawURLEncoding.EncodeToString([]byte(v)) }},
	{"hex", func(v string) string { return hex.EncodeToString([]byte(v)) }},
	{"HEX", func(v string) string { return strings.ToUpper(hex.EncodeToString([]byte(v))) }},
	{"percent, every reserved byte", func(v string) string { return percentAll(v, "%%%02X") }},
	{"percent, lower case", func(v string) string { return percentAll(v, "%%%02x") }},
	{"query escape", url.QueryEscape},
	{"path escape", url.PathEscape},
	{"encodeURIComponent", func(v string) string {
		s := percentAll(v, "%%%02X")
		for _, c := range "!'()*" {
			s = strings.ReplaceAll(s, fmt.Sprintf("%%%02X", c), string(c))
		}
		return s
	}},
}

// percentAll percent-encodes each byte of v outside RFC 3986's unreserved
// set with format.
func percentAll(v, format string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, format, c)
	}
	return b.String()
}

// TestScrubEncodings: each covered encoding of a credential becomes the
// same encoding of its replacement (a secret's placeholder, withheldMark
// for a binding), streamed or whole.
func TestScrubEncodings(t *testing.T) {
	const ph = "PH-0123456789abcdef"
	const token = "tok/9876+5432=10"
	s := newScrubber([]Secret{{Name: "k", Placeholder: ph, Value: encodedValue}},
		[]Binding{{Name: "b", Headers: []BindingHeader{{Name: "Authorization", Value: "Bearer " + token}}}})
	for _, e := range testEncodings {
		for _, c := range []struct{ who, value, repl string }{{"secret", encodedValue, ph}, {"binding", token, withheldMark}} {
			t.Run(e.name+" of a "+c.who, func(t *testing.T) {
				in := `{"echo":"` + e.enc(c.value) + `"}`
				// Where encoders write the value alike, any of them may
				// write the replacement.
				var wants []string
				for _, other := range testEncodings {
					if other.enc(c.value) == e.enc(c.value) {
						wants = append(wants, `{"echo":"`+other.enc(c.repl)+`"}`)
					}
				}
				got, n := s.replace([]byte(in))
				if !slices.Contains(wants, string(got)) || n != 1 {
					t.Fatalf("replace(%q) = %q (%d), want one of %q", in, got, n, wants)
				}
				streamed, err := io.ReadAll(s.body(io.NopCloser(iotest.OneByteReader(strings.NewReader(in))), nil))
				if err != nil || !bytes.Equal(streamed, got) {
					t.Fatalf("streamed: %q, %v; want %q", streamed, err, got)
				}
			})
		}
	}
}

// TestScrubEmbeddedBase64: a value inside a larger base64 text (a Basic
// credential, an encoded request echoed back) is encoded in one of three
// ways, by its offset; each is withheld, the text around it kept.
func TestScrubEmbeddedBase64(t *testing.T) {
	s := newScrubber([]Secret{{Name: "k", Placeholder: "PH-0123456789abcdef", Value: encodedValue}}, nil)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for _, lead := range []string{"user:", "Bearer ", "x-api-key: ", "a", "ab", "abc", "abcd"} {
			t.Run(fmt.Sprintf("%q before it", lead), func(t *testing.T) {
				plain := lead + encodedValue + "\r\nmore of the request"
				in := enc.EncodeToString([]byte(plain))
				got, n := s.replace([]byte(in))
				// Aligned, the value's standalone encoding may match
				// (when the bits after it are zero) and take its place.
				if n != 1 || len(lead)%3 != 0 && !strings.Contains(string(got), withheldMark) {
					t.Fatalf("replace(%q) = %q (%d replaced)", in, got, n)
				}
				// The groups before the value's first whole group are kept.
				keep := len(lead) / 3 * 4
				if !strings.HasPrefix(string(got), in[:keep]) {
					t.Fatalf("%q lost its start %q", got, in[:keep])
				}
				for off := range 3 {
					if whole := (len(encodedValue) - off) / 3 * 3; strings.Contains(string(got), enc.EncodeToString([]byte(encodedValue[off:off+whole]))) {
						t.Fatalf("%q still holds the value at offset %d", got, off)
					}
				}
			})
		}
	}
}

// TestScrubStreamReleases: a scrubbed stream holds back only bytes that may
// begin a credential, so that a streamed answer (server-sent events)
// reaches the box as it comes.
func TestScrubStreamReleases(t *testing.T) {
	s := newScrubber(scrubSecrets, nil)
	events := strings.Repeat("data: {\"text\":\"hello\"}\n\n", 40)
	for _, tt := range []struct{ name, chunk, held string }{
		{"events", events, ""},
		{"a credential's start", events + "sk-live-01", "sk-live-01"},
		{"a credential's encoding's start", events + "c2stbGl2", "c2stbGl2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := &chunksThenStall{chunks: []string{tt.chunk}}
			r := s.body(io.NopCloser(src), nil)
			p := make([]byte, 64<<10)
			n, err := r.Read(p)
			if err != nil || string(p[:n]) != strings.TrimSuffix(tt.chunk, tt.held) {
				t.Fatalf("first read: %q, %v; want all but %q", p[:n], err, tt.held)
			}
			if src.stalled {
				t.Fatal("the reader waited for more than it needed")
			}
		})
	}
}

// chunksThenStall returns its chunks, then fails each read (as a source
// with nothing more yet would block) and records that it was asked.
type chunksThenStall struct {
	chunks  []string
	stalled bool
}

func (c *chunksThenStall) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		c.stalled = true
		return 0, errors.New("stalled: nothing more yet")
	}
	n := copy(p, c.chunks[0])
	if c.chunks[0] = c.chunks[0][n:]; c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

// FuzzScrubStream: a body streamed in reads of any sizes comes out as the
// whole body replaced at once; with an encoding of a credential put in its
// middle, that encoding is replaced (or a credential overlapping it).
func FuzzScrubStream(f *testing.F) {
	f.Add([]byte("a sk-live-0123456789 b sk-live-0123456789-extended c"), []byte{3, 7, 1}, byte(255))
	f.Add([]byte("sk-live-0123456789"), []byte{1}, byte(255))
	f.Add([]byte(""), []byte{}, byte(255))
	for i := range 2 * len(testEncodings) {
		f.Add([]byte("before after"), []byte{5, 1, 2}, byte(i))
		f.Add([]byte("c2st736b736B"), []byte{1}, byte(i))
	}
	secrets := append(slices.Clone(scrubSecrets), Secret{Name: "e", Placeholder: "PH-E", Value: encodedValue})
	s := newScrubber(secrets, nil)
	f.Fuzz(func(t *testing.T, body, cuts []byte, insert byte) {
		if i := int(insert); i < 2*len(testEncodings) {
			value := []string{encodedValue, scrubSecrets[0].Value}[i%2]
			enc := testEncodings[i/2].enc(value)
			mid := len(body) / 2
			body = slices.Concat(body[:mid], []byte(enc), body[mid:])
			if _, n := s.replace(body); n == 0 {
				t.Fatalf("%q holding %q: nothing replaced", body, enc)
			}
		}
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

// BenchmarkScrubBody: bodies streamed through the scrubber, against
// reading one plainly: hex digits (the first bytes of many encodings),
// JSON text, and JSON text with a credential every 4 KiB.
func BenchmarkScrubBody(b *testing.B) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<20) // 64 MiB
	line := []byte(`{"id":"evt_01HZX3","type":"message.delta","delta":{"text":"Ok, here is the plan: 1) read; 2) write."}}` + "\n")
	text := bytes.Repeat(line, (64<<20)/len(line))
	echo := slices.Clone(text)
	for i := 0; i+4096 < len(echo); i += 4096 {
		copy(echo[i:], "sk-live-0123456789")
	}
	s := newScrubber(scrubSecrets, []Binding{{Name: "api", Headers: []BindingHeader{{Name: "Authorization", Value: "Bearer tok-9876543210"}}}})
	for _, tt := range []struct {
		name string
		data []byte
		r    func([]byte) io.Reader
	}{
		{"plain", data, func(d []byte) io.Reader { return bytes.NewReader(d) }},
		{"scrubbed", data, func(d []byte) io.Reader { return s.body(io.NopCloser(bytes.NewReader(d)), nil) }},
		{"scrubbed text", text, func(d []byte) io.Reader { return s.body(io.NopCloser(bytes.NewReader(d)), nil) }},
		{"scrubbed echoes", echo, func(d []byte) io.Reader { return s.body(io.NopCloser(bytes.NewReader(d)), nil) }},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(tt.data)))
			buf := make([]byte, 32<<10)
			for b.Loop() {
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{tt.r(tt.data)}, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestScrubReader: the exported stream scrubber, as a caller outside the
// proxy uses it (a model endpoint's answer): a value and its encodings
// become the placeholder, or withheldMark without one; Close reaches the
// source.
func TestScrubReader(t *testing.T) {
	const key = "sk-proj-ABCdef0123456789/xyz"
	events := func(v string) string {
		return "data: {\"error\":\"bad key " + v + "\"}\n\ndata: {\"echo\":\"" + base64.StdEncoding.EncodeToString([]byte(v)) + "\"}\n\n"
	}
	for _, tt := range []struct {
		name    string
		secrets []Secret
		want    string
	}{
		{"a value without a placeholder", []Secret{{Value: key}}, events(withheldMark)},
		{"a value with its placeholder", []Secret{{Value: key, Placeholder: "PH-model-0123456789"}}, events("PH-model-0123456789")},
		{"nothing to scrub", nil, events(key)},
		{"a value too short", []Secret{{Value: "short"}}, events(key)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := &closeRecorder{Reader: iotest.HalfReader(strings.NewReader(events(key)))}
			r := ScrubReader(src, tt.secrets)
			got, err := io.ReadAll(r)
			if err != nil || string(got) != tt.want {
				t.Fatalf("read %q, %v; want %q", got, err, tt.want)
			}
			if err := r.Close(); err != nil || !src.closed {
				t.Fatalf("Close: %v, source closed %v", err, src.closed)
			}
		})
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// TestScrubberFor: a box's scrubber is built once per version of its
// secrets and bindings, and follows each change.
func TestScrubberFor(t *testing.T) {
	b := testBox(t, Config{}, sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited})
	scrubs := func(s *scrubber, v string) bool { _, n := s.replace([]byte(v)); return n > 0 }
	if !b.scrubberFor().empty() {
		t.Fatal("a box without credentials has something to scrub")
	}
	b.SetSecrets([]Secret{{Name: "a", Placeholder: "PH-A-0123456789", Value: "value-a-0123456789"}})
	s := b.scrubberFor()
	if !scrubs(s, "value-a-0123456789") || b.scrubberFor() != s {
		t.Fatal("the secret is not scrubbed, or the scrubber was built again")
	}
	b.SetSecrets([]Secret{{Name: "b", Placeholder: "PH-B-0123456789", Value: "value-b-0123456789"}})
	if s = b.scrubberFor(); scrubs(s, "value-a-0123456789") || !scrubs(s, "value-b-0123456789") {
		t.Fatal("the scrubber did not follow the secrets")
	}
	b.m.SetBindings(b.id, []Binding{{Name: "k", Headers: []BindingHeader{{"X-Key", "bound-0123456789"}}}})
	if s = b.scrubberFor(); !scrubs(s, "bound-0123456789") || !scrubs(s, "value-b-0123456789") {
		t.Fatal("the scrubber did not follow the bindings")
	}
	b.m.SetBindings(b.id, []Binding{{Name: "k", Headers: []BindingHeader{{"X-Key", "other-0123456789"}}}})
	if s = b.scrubberFor(); scrubs(s, "bound-0123456789") || !scrubs(s, "other-0123456789") {
		t.Fatal("the scrubber did not follow a binding's change")
	}
}
