package image

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"

	"github.com/astrabox/astrabox/sandbox"
)

// compression is how a stream is compressed, told by its magic bytes.
type compression string

const (
	uncompressed compression = ""
	gzipped      compression = "gzip"
	zstandard    compression = "zstd"
	bzipped      compression = "bzip2"
	xzed         compression = "xz"
)

var magics = []struct {
	c     compression
	magic []byte
}{
	{gzipped, []byte{0x1f, 0x8b}},
	{zstandard, []byte{0x28, 0xb5, 0x2f, 0xfd}},
	{bzipped, []byte("BZh")},
	{xzed, []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}},
}

// sniff tells the compression of a stream from its first bytes.
func sniff(head []byte) compression {
	for _, m := range magics {
		if bytes.HasPrefix(head, m.magic) {
			return m.c
		}
	}
	return uncompressed
}

// decompress returns r decompressed according to its magic bytes (gzip,
// zstd, bzip2 or none). The caller closes the result, which does not close
// r. xz is a NOT_SUPPORTED error.
func decompress(r io.Reader) (io.ReadCloser, compression, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(6)
	if err != nil && err != io.EOF {
		return nil, "", fmt.Errorf("read: %w", err)
	}
	c := sniff(head)
	switch c {
	case gzipped:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, c, sandbox.Errorf(sandbox.CodeInvalidRequest, "gzip: %v", err)
		}
		return zr, c, nil
	case zstandard:
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, c, sandbox.Errorf(sandbox.CodeInvalidRequest, "zstd: %v", err)
		}
		return zr.IOReadCloser(), c, nil
	case bzipped:
		return io.NopCloser(bzip2.NewReader(br)), c, nil
	case xzed:
		return nil, c, sandbox.Errorf(sandbox.CodeNotSupported, "xz-compressed archives are not supported: decompress it first or use gzip or zstd")
	}
	return io.NopCloser(br), c, nil
}
