package execd

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/sandbox"
)

// TestClientUploadOverHTTP runs the Go client against a real HTTP server:
// an upload the server stops reading (over MaxUploadBytes) must surface as
// PAYLOAD_TOO_LARGE, not as a broken pipe, and leave nothing behind.
func TestClientUploadOverHTTP(t *testing.T) {
	fs := newFileServer(t, Config{MaxUploadBytes: 1 << 20})
	srv := httptest.NewServer(fs.h)
	t.Cleanup(srv.Close)
	c := client.New(srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	big := io.LimitReader(zeros{}, 32<<20)
	err := c.Upload(ctx, "big", big, client.UploadOptions{})
	if client.CodeOf(err) != sandbox.CodePayloadTooLarge {
		t.Fatalf("oversized upload: %v, want %s", err, sandbox.CodePayloadTooLarge)
	}
	if _, err := os.Stat(fs.path("big")); !os.IsNotExist(err) {
		t.Fatalf("partial file left: %v", err)
	}
	noTempFiles(t, fs.dir)

	data := bytes.Repeat([]byte("0123456789"), 1000)
	if err := c.WriteFile(ctx, "ok", data, 600); err != nil {
		t.Fatal(err)
	}
	body, err := c.Download(ctx, "ok", 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(body)
	body.Close()
	if err != nil || string(got) != "5678901234" {
		t.Fatalf("ranged download %q, %v", got, err)
	}
	if back, err := c.ReadFile(ctx, "ok"); err != nil || !bytes.Equal(back, data) {
		t.Fatalf("read back %d bytes, %v", len(back), err)
	}
}

// zeros is an endless stream of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
