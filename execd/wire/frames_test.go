package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestFramesRoundTrip(t *testing.T) {
	var b bytes.Buffer
	b.Write(AppendFrameHeader(nil, FrameStdout, 42, 5))
	b.WriteString("hello")
	b.Write(AppendFrameHeader(nil, FrameEvent, 0, 2))
	b.WriteString("{}")
	var buf []byte
	kind, off, p, buf, err := ReadFrame(&b, buf)
	if err != nil || kind != FrameStdout || off != 42 || string(p) != "hello" {
		t.Fatalf("%q %d %q %v", kind, off, p, err)
	}
	kind, _, p, _, err = ReadFrame(&b, buf)
	if err != nil || kind != FrameEvent || string(p) != "{}" {
		t.Fatalf("%q %q %v", kind, p, err)
	}
	if _, _, _, _, err := ReadFrame(&b, nil); !errors.Is(err, io.EOF) {
		t.Fatalf("want EOF, got %v", err)
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add(append(AppendFrameHeader(nil, FrameStderr, 1, 3), "abc"...))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var buf []byte
		for i := 0; i < 100; i++ {
			var err error
			var p []byte
			if _, _, p, buf, err = ReadFrame(r, buf); err != nil {
				return
			}
			if len(p) > MaxFramePayload {
				t.Fatal("oversized payload")
			}
		}
	})
}
