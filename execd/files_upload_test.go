package execd

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// formPart is one part of a multipart upload body.
type formPart struct {
	name string // form field name
	data []byte
}

func metaPart(m wire.FileMetadata) formPart {
	b, _ := json.Marshal(m)
	return formPart{uploadMetadataField, b}
}

func filePart(data string) formPart { return formPart{uploadFileField, []byte(data)} }

// multipartBody encodes parts the way the OpenSandbox SDKs do: metadata as
// a JSON "file" named metadata, files as octet streams.
func multipartBody(t *testing.T, parts ...formPart) (*bytes.Buffer, http.Header) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := make(textproto.MIMEHeader)
		h.Set("Content-Disposition", `form-data; name="`+p.name+`"; filename="`+p.name+`"`)
		if p.name == uploadMetadataField {
			h.Set("Content-Type", "application/json")
		} else {
			h.Set("Content-Type", "application/octet-stream")
		}
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(p.data)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf, http.Header{"Content-Type": {mw.FormDataContentType()}}
}

func (fs *fileServer) upload(parts ...formPart) *httptest.ResponseRecorder {
	fs.t.Helper()
	body, h := multipartBody(fs.t, parts...)
	return fs.serve("POST", "/files/upload", body, h)
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func ptr[T any](v T) *T { return &v }

func TestUpload(t *testing.T) {
	fs := newFileServer(t, Config{})
	data := "hello, world\n"
	rec := fs.upload(
		metaPart(wire.FileMetadata{Path: "new/dir/a.txt", Size: ptr(int64(len(data))), SHA256: strings.ToUpper(sha(data))}),
		filePart(data),
		metaPart(wire.FileMetadata{Path: fs.path("b.sh"), Mode: 755}),
		filePart("#!/bin/sh\n"),
	)
	wantStatus(t, rec, http.StatusOK)
	checkFile(t, fs.path("new/dir/a.txt"), data, 0o644)
	checkFile(t, fs.path("b.sh"), "#!/bin/sh\n", 0o755)

	// Metadata parts may also all come first; a second upload replaces.
	rec = fs.upload(
		metaPart(wire.FileMetadata{Path: "x", Owner: strconv.Itoa(os.Getuid()), Group: strconv.Itoa(os.Getgid())}),
		metaPart(wire.FileMetadata{Path: "new/dir/a.txt", Mode: 600}),
		filePart("x"),
		filePart(""),
	)
	wantStatus(t, rec, http.StatusOK)
	checkFile(t, fs.path("x"), "x", 0o644)
	checkFile(t, fs.path("new/dir/a.txt"), "", 0o600)
	noTempFiles(t, fs.dir)
}

func checkFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != content {
		t.Fatalf("%s holds %q, want %q", p, b, content)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != mode {
		t.Fatalf("%s has mode %v, want %v", p, fi.Mode(), mode)
	}
}

func TestUploadTooLarge(t *testing.T) {
	fs := newFileServer(t, Config{MaxUploadBytes: 1024})
	big := strings.Repeat("x", 4096)
	// Exactly at the limit is fine.
	wantStatus(t, fs.upload(metaPart(wire.FileMetadata{Path: "ok"}), filePart(big[:1024])), http.StatusOK)
	tests := []struct {
		name  string
		parts []formPart
	}{
		{"streamed", []formPart{metaPart(wire.FileMetadata{Path: "big"}), filePart(big)}},
		{"one byte over", []formPart{metaPart(wire.FileMetadata{Path: "big"}), filePart(big[:1025])}},
		{"announced", []formPart{metaPart(wire.FileMetadata{Path: "big", Size: ptr(int64(4096))}), filePart(big)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, fs.upload(tt.parts...), http.StatusRequestEntityTooLarge, sandbox.CodePayloadTooLarge)
			if _, err := os.Stat(fs.path("big")); !os.IsNotExist(err) {
				t.Fatalf("partial file left: %v", err)
			}
			noTempFiles(t, fs.dir)
		})
	}
}

func TestUploadVerification(t *testing.T) {
	fs := newFileServer(t, Config{})
	data := "some bytes"
	fs.write("keep", "old")
	tests := []struct {
		name string
		meta wire.FileMetadata
	}{
		{"wrong sha256", wire.FileMetadata{Path: "v", SHA256: sha("other")}},
		{"size too small", wire.FileMetadata{Path: "v", Size: ptr(int64(len(data) - 1))}},
		{"size too large", wire.FileMetadata{Path: "v", Size: ptr(int64(len(data) + 1))}},
		{"replace keeps old on failure", wire.FileMetadata{Path: "keep", SHA256: sha("other")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, fs.upload(metaPart(tt.meta), filePart(data)), http.StatusUnprocessableEntity, sandbox.CodeUploadVerification)
			if _, err := os.Stat(fs.path("v")); !os.IsNotExist(err) {
				t.Fatalf("unverified file left: %v", err)
			}
			checkFile(t, fs.path("keep"), "old", 0o644)
			noTempFiles(t, fs.dir)
		})
	}
}

func TestUploadBadRequests(t *testing.T) {
	fs := newFileServer(t, Config{})
	fs.write("dir/f", "")
	goodMeta := metaPart(wire.FileMetadata{Path: "t"})
	body, h := multipartBody(t, goodMeta, filePart(strings.Repeat("z", 10000)))
	truncated := body.Bytes()[:body.Len()-200]
	tests := []struct {
		name   string
		body   []byte
		header http.Header
		parts  []formPart
		status int
		code   sandbox.Code
	}{
		{name: "not multipart", body: []byte(`{"path":"t"}`), header: http.Header{"Content-Type": {"application/json"}}, status: 400, code: sandbox.CodeInvalidRequest},
		{name: "no boundary", body: []byte("x"), header: http.Header{"Content-Type": {"multipart/form-data"}}, status: 400, code: sandbox.CodeInvalidRequest},
		{name: "truncated body", body: truncated, header: h, status: 400, code: sandbox.CodeInvalidRequest},
		{name: "garbage body", body: []byte("not multipart at all"), header: h, status: 400, code: sandbox.CodeInvalidRequest},
		{name: "empty form", parts: nil, status: 400, code: sandbox.CodeInvalidRequest},
		{name: "file before metadata", parts: []formPart{filePart("x"), goodMeta}, status: 400, code: sandbox.CodeInvalidFileMetadata},
		{name: "metadata without file", parts: []formPart{goodMeta}, status: 400, code: sandbox.CodeInvalidFileMetadata},
		{name: "bad metadata json", parts: []formPart{{uploadMetadataField, []byte("{")}, filePart("x")}, status: 400, code: sandbox.CodeInvalidFileMetadata},
		{name: "no path", parts: []formPart{metaPart(wire.FileMetadata{Mode: 644}), filePart("x")}, status: 400, code: sandbox.CodeInvalidFileMetadata},
		{name: "nul in path", parts: []formPart{metaPart(wire.FileMetadata{Path: "t\x00"}), filePart("x")}, status: 400, code: sandbox.CodeInvalidPath},
		{name: "bad mode", parts: []formPart{metaPart(wire.FileMetadata{Path: "t", Mode: 888}), filePart("x")}, status: 400, code: sandbox.CodeInvalidFileMetadata},
		{name: "bad sha256", parts: []formPart{metaPart(wire.FileMetadata{Path: "t", SHA256: "abc"}), filePart("x")}, status: 400, code: sandbox.CodeInvalidFileMetadata},
		{name: "negative size", parts: []formPart{metaPart(wire.FileMetadata{Path: "t", Size: ptr(int64(-1))}), filePart("x")}, status: 400, code: sandbox.CodeInvalidFileMetadata},
		{name: "unknown owner", parts: []formPart{metaPart(wire.FileMetadata{Path: "t", Owner: "no-such-user-astrabox"}), filePart("x")}, status: 400, code: sandbox.CodeInvalidFileMetadata},
		{name: "unknown field", parts: []formPart{{"other", []byte("x")}}, status: 400, code: sandbox.CodeInvalidRequest},
		{name: "target is a directory", parts: []formPart{metaPart(wire.FileMetadata{Path: "dir"}), filePart("x")}, status: 400, code: sandbox.CodeInvalidPath},
		{name: "parent is a file", parts: []formPart{metaPart(wire.FileMetadata{Path: "dir/f/t"}), filePart("x")}, status: 400, code: sandbox.CodeInvalidPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, hdr := tt.body, tt.header
			if b == nil {
				buf, h := multipartBody(t, tt.parts...)
				b, hdr = buf.Bytes(), h
			}
			wantError(t, fs.serve("POST", "/files/upload", bytes.NewReader(b), hdr), tt.status, tt.code)
			if _, err := os.Stat(fs.path("t")); !os.IsNotExist(err) {
				t.Fatalf("file left by a refused upload: %v", err)
			}
			noTempFiles(t, fs.dir)
		})
	}
}
