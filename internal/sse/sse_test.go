package sse

import (
	"bufio"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWriterReaderRoundTrip(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	if err := w.Event("7", "stdout", map[string]string{"text": "a\nb"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Comment("ping"); err != nil {
		t.Fatal(err)
	}
	if err := w.Event("", "", 1); err != nil {
		t.Fatal(err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	r := NewReader(rec.Body, 0)
	f, err := r.Next()
	if err != nil || f.ID != "7" || f.Event != "stdout" || f.Data != `{"text":"a\nb"}` {
		t.Fatalf("frame %+v err %v", f, err)
	}
	f, err = r.Next()
	if err != nil || f.Data != "1" || f.ID != "" {
		t.Fatalf("frame %+v err %v", f, err)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("want EOF, got %v", err)
	}
}

func TestReaderCases(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Frame
	}{
		{"multi data lines", "data: a\ndata: b\n\n", []Frame{{Data: "a\nb"}}},
		{"crlf", "id: 1\r\ndata: x\r\n\r\n", []Frame{{ID: "1", Data: "x"}}},
		{"no space", "data:x\n\n", []Frame{{Data: "x"}}},
		{"event without data skipped", "event: a\n\ndata: y\n\n", []Frame{{Data: "y"}}},
		{"truncated frame dropped", "data: z", nil},
		{"unknown field ignored", "retry: 5\nfoo\ndata: q\n\n", []Frame{{Data: "q"}}},
		{"id and event kept for their frame only", "id: 9\nevent: e\ndata: " + strings.Repeat("v", 40) + "\n\ndata: w\n\n",
			[]Frame{{ID: "9", Event: "e", Data: strings.Repeat("v", 40)}, {Data: "w"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.in), 0)
			var got []Frame
			for {
				f, err := r.Next()
				if err != nil {
					break
				}
				got = append(got, f)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("frame %d: got %+v want %+v", i, got[i], tt.want[i])
				}
			}
			// NextRaw parses the same frames (here through a small
			// buffer, so that long lines are collected too).
			raw := NewReader(strings.NewReader(tt.in), 0)
			raw.r = bufio.NewReaderSize(strings.NewReader(tt.in), 16)
			for i := 0; ; i++ {
				f, err := raw.NextRaw()
				if err != nil {
					if i != len(tt.want) {
						t.Fatalf("NextRaw: %d frames, want %d (%v)", i, len(tt.want), err)
					}
					break
				}
				if g := (Frame{ID: string(f.ID), Event: string(f.Event), Data: string(f.Data)}); i >= len(tt.want) || g != tt.want[i] {
					t.Fatalf("NextRaw frame %d: %+v", i, g)
				}
			}
		})
	}
}

func TestReaderLimit(t *testing.T) {
	r := NewReader(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), 10)
	if _, err := r.Next(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("want ErrFrameTooLarge, got %v", err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add("id: 1\nevent: e\ndata: {}\n\n")
	f.Add(":c\r\n\r\ndata:\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		r := NewReader(strings.NewReader(in), 1024)
		for i := 0; i < 1000; i++ {
			if _, err := r.Next(); err != nil {
				return
			}
		}
	})
}
