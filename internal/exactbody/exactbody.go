// Package exactbody wraps the request bodies a reverse proxy forwards so
// that they end by themselves after their declared length.
//
// http.Transport reads a request body once more past its declared length
// to check there is nothing left. When the upstream answers before that
// (execd answers as soon as it has parsed a command), the server that
// received the request may by then have closed the inbound body (net/http
// drains and closes an unread request body when the response starts);
// that extra read fails, and the transport drops the upstream connection
// mid-answer: the client sees a cut stream (golang/go#40747). A body the
// client cuts short still fails.
package exactbody

import "io"

// Wrap returns rc as a body that reports io.EOF once n bytes were read,
// without reading rc again. n <= 0 returns rc unchanged.
func Wrap(rc io.ReadCloser, n int64) io.ReadCloser {
	if rc == nil || n <= 0 {
		return rc
	}
	return &body{ReadCloser: rc, left: n}
}

type body struct {
	io.ReadCloser
	left int64
}

func (b *body) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left <= 0 && err == nil {
		err = io.EOF
	}
	return n, err
}
