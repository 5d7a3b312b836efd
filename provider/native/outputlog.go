package native

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// The output log of a box (DataDir/boxes/<id>/init.log) holds what the
// box's init and its entrypoint write to stdout and stderr. The host
// creates the file and hands it to init as fdLog; nothing else in the box
// ever holds it: init reads its own output and the entrypoint's from pipes
// (see initoutput.go) and writes them here through a cappedLog, so the file
// never grows past logMax bytes (plus, once, what the Go runtime prints if
// init itself crashes). The host reads no more than logTailMax bytes of it.
// It stays plain text: once full, it starts over with the newest logKeep
// bytes behind the marker logDropped.
const (
	logMax     = 64 << 10
	logKeep    = logMax / 2
	logTailMax = 512
	logDropped = "[astrabox: older output was dropped; this log keeps the newest bytes]\n"
)

// cappedLog writes to f, a file it keeps at most max bytes long, the
// newest bytes written. f is written at its own offset (so a crash report
// the runtime prints to a duplicate of f lands after the log) and must be
// open for reading and writing, without O_APPEND. It is safe for
// concurrent use; a write error is returned and the log goes on.
type cappedLog struct {
	mu   sync.Mutex
	f    *os.File
	size int64 // bytes in f; f's offset
	max  int64
	keep int
}

// newCappedLog returns the log on f, which may hold output already (a
// longer f is cut down at the first write past max).
func newCappedLog(f *os.File, max int64) (*cappedLog, error) {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("output log: %w", err)
	}
	return &cappedLog{f: f, size: size, max: max, keep: int(max / 2)}, nil
}

// Write implements io.Writer. It always consumes all of p.
func (l *cappedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size+int64(len(p)) > l.max {
		if err := l.restart(p); err != nil {
			return len(p), fmt.Errorf("output log: %w", err)
		}
		return len(p), nil
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	if err != nil {
		return len(p), fmt.Errorf("output log: %w", err)
	}
	return len(p), nil
}

// restart rewrites the file as logDropped and the newest keep bytes of its
// content followed by p.
func (l *cappedLog) restart(p []byte) error {
	buf := make([]byte, 0, len(logDropped)+l.keep)
	buf = append(buf, logDropped...)
	if len(p) >= l.keep {
		buf = append(buf, p[len(p)-l.keep:]...)
	} else {
		off := max(l.size-int64(l.keep-len(p)), 0)
		old := buf[len(buf) : len(buf)+int(l.size-off)]
		if _, err := l.f.ReadAt(old, off); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		buf = append(buf[:len(buf)+len(old)], p...)
	}
	if _, err := l.f.WriteAt(buf, 0); err != nil {
		return err
	}
	if err := l.f.Truncate(int64(len(buf))); err != nil {
		return err
	}
	if _, err := l.f.Seek(int64(len(buf)), io.SeekStart); err != nil {
		return err
	}
	l.size = int64(len(buf))
	return nil
}

// readTail returns at most n bytes from the end of the file at path,
// reading no more than that whatever the file's size.
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(fi.Size()-n, 0)
	b := make([]byte, fi.Size()-off)
	m, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:m], nil
}
