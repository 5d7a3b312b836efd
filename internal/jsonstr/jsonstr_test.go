package jsonstr

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendMatchesEncodingJSON(t *testing.T) {
	tests := []string{"", "plain", "a\"b\\c", "tab\there\nnew\rline", "\x00\x01\x1f\x7f", "€ and 😀",
		"bad \xff utf8", "\u2028\u2029", "<html>&amp;", strings.Repeat("x", 100000)}
	for _, s := range tests {
		enc := Append(nil, s)
		var got string
		if err := json.Unmarshal(enc, &got); err != nil {
			t.Fatalf("Append(%q) = %s is not valid JSON: %v", s, enc, err)
		}
		want := strings.ToValidUTF8(s, "\uFFFD")
		if got != want {
			t.Errorf("round trip of %q gave %q", s, got)
		}
	}
}

func TestUnquote(t *testing.T) {
	tests := []struct {
		in   string
		want string
		n    int
		ok   bool
	}{
		{`"abc"rest`, "abc", 5, true},
		{`"a\nb\"c\\d\/e"`, "a\nb\"c\\d/e", 15, true},
		{`"\u00e9\ud83d\ude00"`, "é😀", 20, true},
		{`"\ud83d"`, "\uFFFD", 8, true},
		{`"unterminated`, "", 0, false},
		{`"bad \x escape"`, "", 0, false},
		{"\"ctl\x01\"", "", 0, false},
		{`noquote`, "", 0, false},
		{`"\u12"`, "", 0, false},
	}
	for _, tt := range tests {
		got, n, err := Unquote([]byte(tt.in))
		if (err == nil) != tt.ok || got != tt.want || (tt.ok && n != tt.n) {
			t.Errorf("Unquote(%q) = %q, %d, %v", tt.in, got, n, err)
		}
	}
}

func FuzzRoundTrip(f *testing.F) {
	f.Add("hello\n\"world\"\x00€\xff")
	f.Fuzz(func(t *testing.T, s string) {
		enc := Append(nil, s)
		got, n, err := Unquote(enc)
		if err != nil || n != len(enc) {
			t.Fatalf("Unquote(Append(%q)) failed: %v (n=%d of %d)", s, err, n, len(enc))
		}
		if want := strings.ToValidUTF8(s, "\uFFFD"); got != want {
			// encoding/json replaces each invalid byte; ToValidUTF8 a run.
			var std string
			_ = json.Unmarshal(enc, &std)
			if got != std {
				t.Fatalf("round trip of %q: got %q, encoding/json %q", s, got, std)
			}
		}
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 out: %q", got)
		}
	})
}

func FuzzUnquoteAgreesWithEncodingJSON(f *testing.F) {
	f.Add([]byte(`"a\u00e9\n"`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != '"' {
			return // Unquote's contract: data starts with the opening quote
		}
		got, n, err := Unquote(data)
		var std string
		stdErr := json.Unmarshal(data, &std)
		trimmed := len(strings.TrimRight(string(data), " \t\r\n"))
		if stdErr == nil && (err != nil || got != std || n != trimmed) {
			t.Fatalf("Unquote(%q) = %q, %d, %v; encoding/json %q", data, got, n, err, std)
		}
	})
}
