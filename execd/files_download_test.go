package execd

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/astrabox/astrabox/sandbox"
)

func TestDownload(t *testing.T) {
	fs := newFileServer(t, Config{})
	content := "0123456789abcdefghij" // 20 bytes
	fs.write("d/f.bin", content)
	fs.write("empty", "")
	fs.write("héllo wörld.txt", "x")

	rec := fs.serve("GET", "/files/download?"+query("path", "d/f.bin"), nil, nil)
	wantStatus(t, rec, http.StatusOK)
	h := rec.Header()
	if rec.Body.String() != content || h.Get("Content-Length") != "20" || h.Get("Content-Type") != "application/octet-stream" ||
		h.Get("Content-Disposition") != `attachment; filename=f.bin` {
		t.Fatalf("full download: headers %v body %q", h, rec.Body.String())
	}
	rec = fs.serve("GET", "/files/download?"+query("path", "héllo wörld.txt"), nil, nil)
	wantStatus(t, rec, http.StatusOK)
	if cd := rec.Header().Get("Content-Disposition"); !strings.Contains(cd, "filename*=utf-8''h%C3%A9llo%20w%C3%B6rld.txt") {
		t.Fatalf("Content-Disposition %q does not encode the name", cd)
	}

	ranges := []struct {
		header, body, contentRange string
	}{
		{"bytes=0-4", "01234", "bytes 0-4/20"},
		{"bytes=5-5", "5", "bytes 5-5/20"},
		{"bytes=15-", "fghij", "bytes 15-19/20"},
		{"bytes=15-100", "fghij", "bytes 15-19/20"},
		{"bytes=-3", "hij", "bytes 17-19/20"},
		{"bytes=-50", content, "bytes 0-19/20"},
		{" bytes=0-0 ", "0", "bytes 0-0/20"},
	}
	for _, tt := range ranges {
		rec := fs.serve("GET", "/files/download?"+query("path", "d/f.bin"), nil, http.Header{"Range": {tt.header}})
		wantStatus(t, rec, http.StatusPartialContent)
		if rec.Body.String() != tt.body || rec.Header().Get("Content-Range") != tt.contentRange ||
			rec.Header().Get("Content-Length") != strconv.Itoa(len(tt.body)) {
			t.Errorf("Range %q: body %q headers %v; want %q, %q", tt.header, rec.Body.String(), rec.Header(), tt.body, tt.contentRange)
		}
	}

	unsatisfiable := []struct{ path, header string }{
		{"d/f.bin", "bytes=20-"},
		{"d/f.bin", "bytes=100-200"},
		{"d/f.bin", "bytes=-0"},
		{"d/f.bin", "bytes=0-1,4-5"},
		{"d/f.bin", "items=0-1"},
		{"d/f.bin", "bytes=5-1"},
		{"d/f.bin", "bytes=x-y"},
		{"d/f.bin", "bytes=-"},
		{"d/f.bin", "bytes=+1-2"},
		{"empty", "bytes=0-"},
		{"empty", "bytes=-1"},
	}
	for _, tt := range unsatisfiable {
		rec := fs.serve("GET", "/files/download?"+query("path", tt.path), nil, http.Header{"Range": {tt.header}})
		wantError(t, rec, http.StatusRequestedRangeNotSatisfiable, sandbox.CodeRangeNotSatisfiable)
		size := "20"
		if tt.path == "empty" {
			size = "0"
		}
		if cr := rec.Header().Get("Content-Range"); cr != "bytes */"+size {
			t.Errorf("Range %q on %s: Content-Range %q", tt.header, tt.path, cr)
		}
	}
}

func TestDownloadLines(t *testing.T) {
	fs := newFileServer(t, Config{})
	fs.write("lines.txt", "one\ntwo\nthree\nfour\nfive")
	tests := []struct {
		q    []string
		want string
	}{
		{[]string{"offset", "1"}, "one\ntwo\nthree\nfour\nfive"},
		{[]string{"offset", "2", "limit", "2"}, "two\nthree\n"},
		{[]string{"limit", "1"}, "one\n"},
		{[]string{"offset", "5"}, "five"},
		{[]string{"offset", "4", "limit", "10"}, "four\nfive"},
		{[]string{"offset", "9"}, ""},
	}
	for _, tt := range tests {
		rec := fs.serve("GET", "/files/download?"+query(append([]string{"path", "lines.txt"}, tt.q...)...), nil, nil)
		wantStatus(t, rec, http.StatusOK)
		if rec.Body.String() != tt.want || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
			t.Errorf("%v: got %q (%s), want %q", tt.q, rec.Body.String(), rec.Header().Get("Content-Type"), tt.want)
		}
	}
}

func TestDownloadBadRequests(t *testing.T) {
	fs := newFileServer(t, Config{})
	fs.write("f", "a\nb\n")
	if err := os.Mkdir(fs.path("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fs.path("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		q      string
		header http.Header
		status int
		code   sandbox.Code
	}{
		{"missing", query("path", "nope"), nil, 404, sandbox.CodeFileNotFound},
		{"no path", "", nil, 400, sandbox.CodeMissingQuery},
		{"nul", query("path", "f\x00"), nil, 400, sandbox.CodeInvalidPath},
		{"directory", query("path", "dir"), nil, 400, sandbox.CodeInvalidPath},
		{"fifo", query("path", "fifo"), nil, 400, sandbox.CodeInvalidPath},
		{"range with lines", query("path", "f", "offset", "1"), http.Header{"Range": {"bytes=0-1"}}, 400, sandbox.CodeInvalidRequest},
		{"offset zero", query("path", "f", "offset", "0"), nil, 400, sandbox.CodeInvalidRequest},
		{"limit zero", query("path", "f", "limit", "0"), nil, 400, sandbox.CodeInvalidRequest},
		{"offset not a number", query("path", "f", "offset", "x"), nil, 400, sandbox.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, fs.serve("GET", "/files/download?"+tt.q, nil, tt.header), tt.status, tt.code)
		})
	}
}

func TestCopyLines(t *testing.T) {
	text := "a\n\nccc\nd"
	tests := []struct {
		first, limit int64
		want         string
	}{
		{1, 0, text},
		{1, 1, "a\n"},
		{2, 1, "\n"},
		{2, 2, "\nccc\n"},
		{3, 0, "ccc\nd"},
		{4, 1, "d"},
		{5, 0, ""},
		{1, 1 << 62, text},
		{1 << 62, 1 << 62, ""},
	}
	for _, tt := range tests {
		for _, r := range []io.Reader{strings.NewReader(text), iotest.OneByteReader(strings.NewReader(text)), iotest.DataErrReader(strings.NewReader(text))} {
			var out bytes.Buffer
			if err := copyLines(&out, r, tt.first, tt.limit); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("copyLines(%d, %d) = %q, want %q", tt.first, tt.limit, out.String(), tt.want)
			}
		}
	}
	if err := copyLines(io.Discard, iotest.ErrReader(io.ErrUnexpectedEOF), 1, 0); err != io.ErrUnexpectedEOF {
		t.Fatalf("read error not returned: %v", err)
	}
}

// FuzzParseRange checks that range parsing never panics and that every
// range it accepts lies within the file.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-1", "bytes=-5", "bytes=3-", "bytes=9223372036854775807-", "bytes=-9223372036854775808", "bytes=1-0"} {
		f.Add(s, int64(10))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			return
		}
		start, length, err := parseRange(h, size)
		if err != nil {
			if sandbox.CodeOf(err) != sandbox.CodeRangeNotSatisfiable {
				t.Fatalf("parseRange(%q, %d): code %s", h, size, sandbox.CodeOf(err))
			}
			return
		}
		if start < 0 || length <= 0 || start+length > size {
			t.Fatalf("parseRange(%q, %d) = %d, %d: outside the file", h, size, start, length)
		}
	})
}
