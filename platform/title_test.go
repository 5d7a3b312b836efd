package platform_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/store"
)

func TestTitleOf(t *testing.T) {
	long := strings.Repeat("word ", 30)
	tests := []struct{ in, want string }{
		{"write fizzbuzz.py and run it", "write fizzbuzz.py and run it"},
		{"\n\n  first   line\nsecond", "first line"},
		{"tabs\tand  spaces", "tabs and spaces"},
		{long, strings.Repeat("word ", 11) + "word…"},
		{strings.Repeat("x", 100), strings.Repeat("x", 59) + "…"},
		{strings.Repeat("ü", 100), strings.Repeat("ü", 59) + "…"},
	}
	for _, tt := range tests {
		got := platform.TitleOf(tt.in)
		if got != tt.want {
			t.Errorf("TitleOf(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if n := utf8.RuneCountInString(got); n > 60 {
			t.Errorf("TitleOf(%q) has %d runes", tt.in, n)
		}
	}
}

// TestSessionTakesItsFirstInputAsTitle: an untitled Session is titled by
// its first input; a title given, or taken, stays.
func TestSessionTakesItsFirstInputAsTitle(t *testing.T) {
	f := newFront(t)
	f.putAgent(t, "agt_public", store.VisibilityPublic, nil, nil, nil)
	ctx := as(t, carol)
	untitled, err := f.sess.CreateSession(ctx, "agt_public", "")
	if err != nil {
		t.Fatal(err)
	}
	titled, err := f.sess.CreateSession(ctx, "agt_public", "Mine")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"write fizzbuzz.py\nand run it", "then test it"} {
		for _, id := range []string{untitled.ID, titled.ID} {
			if _, _, err := f.sess.SendInput(ctx, id, in, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	for id, want := range map[string]string{untitled.ID: "write fizzbuzz.py", titled.ID: "Mine"} {
		s, err := f.sess.GetSession(ctx, id)
		if err != nil || s.Title != want {
			t.Errorf("session %s titled %q (%v), want %q", id, s.Title, err, want)
		}
	}
}
