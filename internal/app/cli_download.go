package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	execdclient "github.com/astrabox/astrabox/execd/client"
)

// copyOut copies the regular file spath of a box to out (a local file, or
// standard output when f is nil). It refuses what is not a regular file
// (a FIFO would never end, a device would stream forever) and a file over
// max bytes before anything is written, never writes past the size the
// box declared (a file that grows meanwhile is an error), and writes runs
// of zeros into a local file as holes, so a sparse file stays sparse.
func copyOut(ctx context.Context, x *execdclient.Client, spath string, out io.Writer, f *os.File, max int64) error {
	infos, err := x.Info(ctx, spath)
	if err != nil {
		return err
	}
	info, ok := infos[spath]
	if !ok {
		return fmt.Errorf("cp: %s: no such file in the box", spath)
	}
	if info.Type != "file" {
		return fmt.Errorf("cp: %s is a %s, not a regular file", spath, info.Type)
	}
	if max > 0 && info.Size > max {
		return fmt.Errorf("cp: %s is %d bytes, over the limit of %d (--max-size)", spath, info.Size, max)
	}
	rc, err := x.Download(ctx, spath, 0, -1)
	if err != nil {
		return err
	}
	defer rc.Close()
	body := io.LimitReader(rc, info.Size)
	var n int64
	if f != nil {
		n, err = sparseCopy(f, body)
		if err == nil {
			err = f.Truncate(n) // a trailing hole
		}
	} else {
		n, err = io.Copy(out, body)
	}
	if err != nil {
		return err
	}
	if n < info.Size {
		return fmt.Errorf("cp: %s: got %d of its %d bytes (it shrank, or the connection broke)", spath, n, info.Size)
	}
	var one [1]byte
	if k, _ := rc.Read(one[:]); k > 0 {
		return fmt.Errorf("cp: %s grew past the %d bytes it had; the copy stops there", spath, info.Size)
	}
	return nil
}

// sparseBlock is the unit sparseCopy looks for zeros in.
const sparseBlock = 64 << 10

// sparseCopy copies r to f, seeking over blocks of zeros instead of
// writing them; it returns the bytes copied (holes included).
func sparseCopy(f *os.File, r io.Reader) (int64, error) {
	buf := make([]byte, sparseBlock)
	zero := make([]byte, sparseBlock)
	var n int64
	for {
		k, err := io.ReadFull(r, buf)
		if k > 0 {
			if bytes.Equal(buf[:k], zero[:k]) {
				if _, serr := f.Seek(int64(k), io.SeekCurrent); serr != nil {
					return n, serr
				}
			} else if _, werr := f.Write(buf[:k]); werr != nil {
				return n, werr
			}
			n += int64(k)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
