package pydriver

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		line string
		want Message
		ok   bool
	}{
		{`{"type":"ready","python":"3.12.1"}`, Message{Type: TypeReady, Python: "3.12.1"}, true},
		{`{"type":"started","n":3}`, Message{Type: TypeStarted, N: 3}, true},
		{`{"type":"started"}`, Message{}, false},
		{`{"type":"result","data":{"text/plain":"42"}}`, Message{Type: TypeResult, Data: map[string]string{"text/plain": "42"}}, true},
		{`{"type":"result","data":{}}`, Message{}, false},
		{`{"type":"result","data":{"text/plain":1}}`, Message{}, false},
		{`{"type":"error","ename":"ZeroDivisionError","evalue":"division by zero","traceback":["a","b"]}`,
			Message{Type: TypeError, EName: "ZeroDivisionError", EValue: "division by zero", Traceback: []string{"a", "b"}}, true},
		{`{"type":"error","evalue":"x"}`, Message{}, false},
		{`{"type":"done","marked":[1,2]}`, Message{Type: TypeDone, Marked: []int{1, 2}}, true},
		{`{"type":"done","marked":[]}`, Message{Type: TypeDone, Marked: []int{}}, true},
		{`{"type":"done","marked":[3]}`, Message{}, false},
		{`{"type":"nope"}`, Message{}, false},
		{`not json`, Message{}, false},
		{``, Message{}, false},
	}
	for _, tt := range tests {
		got, err := Parse([]byte(tt.line))
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrMalformed)) {
			t.Errorf("Parse(%s): error %v, want ok=%v", tt.line, err, tt.ok)
			continue
		}
		if tt.ok && !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%s) = %+v, want %+v", tt.line, got, tt.want)
		}
	}
}

func TestReader(t *testing.T) {
	long := `{"type":"result","data":{"text/plain":"` + strings.Repeat("x", MaxMessageBytes) + `"}}`
	input := `{"type":"ready"}` + "\n" +
		"garbage\n" +
		long + "\n" +
		`{"type":"started","n":1}` + "\n" +
		`{"type":"done","marked":[1]}`
	r := NewReader(strings.NewReader(input))
	var types []string
	for {
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("unexpected error %v", err)
			}
			types = append(types, "bad")
			continue
		}
		types = append(types, m.Type)
	}
	if got, want := strings.Join(types, ","), "ready,bad,bad,started,bad"; got != want {
		t.Fatalf("messages %s, want %s", got, want)
	}
}

func TestRequestEncode(t *testing.T) {
	line, err := Request{Code: "print('a')\nx = \"\\n\"", Marker: "m"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
		t.Fatalf("not one line: %q", line)
	}
}

func TestPreamble(t *testing.T) {
	p := Preamble()
	n, rest, ok := bytes.Cut(p, []byte("\n"))
	if !ok {
		t.Fatal("no length line")
	}
	if size, err := strconv.Atoi(string(n)); err != nil || size != len(rest) || size == 0 {
		t.Fatalf("length %q for %d bytes", n, len(rest))
	}
	if args := Args("python3"); args[0] != "python3" || args[1] != "-u" {
		t.Fatalf("args %q", args)
	}
}

// FuzzReader checks that no input makes the reader panic or loop, and
// that every message it accepts is valid and survives a round trip.
func FuzzReader(f *testing.F) {
	f.Add([]byte(`{"type":"ready"}` + "\n" + `{"type":"done","marked":[1,2]}` + "\n"))
	f.Add([]byte(`{"type":"result","data":{"text/plain":"\u2603"}}`))
	f.Add([]byte("\n\n{\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		for i := 0; ; i++ {
			if i > len(data)+1 {
				t.Fatal("reader does not make progress")
			}
			m, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("error %v is not ErrMalformed", err)
				}
				continue
			}
			line, err := jsonLine(m)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Parse(line)
			if err != nil || !reflect.DeepEqual(normal(again), normal(m)) {
				t.Fatalf("round trip of %+v gave %+v, %v", m, again, err)
			}
		}
	})
}

func jsonLine(m Message) ([]byte, error) { return json.Marshal(m) }

// normal maps empty slices and maps to nil, which omitempty conflates.
func normal(m Message) Message {
	if len(m.Data) == 0 {
		m.Data = nil
	}
	if len(m.Traceback) == 0 {
		m.Traceback = nil
	}
	if len(m.Marked) == 0 {
		m.Marked = nil
	}
	return m
}
