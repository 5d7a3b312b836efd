package native

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestHostEtc(t *testing.T) {
	etc := t.TempDir()
	for _, d := range []string{"java-17-openjdk", "java-21-openjdk", "javascript"} {
		if err := os.Mkdir(filepath.Join(etc, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got := hostEtc(etc)
	for _, want := range []string{"ssl", "ca-certificates", "ld.so.cache", "alternatives", "localtime", "java-17-openjdk", "java-21-openjdk"} {
		if !slices.Contains(got, filepath.Join(etc, want)) {
			t.Errorf("%s is not bound: %v", want, got)
		}
	}
	if slices.Contains(got, filepath.Join(etc, "javascript")) {
		t.Errorf("javascript (not a JDK's) is bound: %v", got)
	}
}
