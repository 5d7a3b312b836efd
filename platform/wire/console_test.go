package wire

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// consoleSource returns the text of the console's TypeScript sources (the
// console is built from them; they live beside this module's Go code).
func consoleSource(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	root := filepath.Join("..", "..", "console", "src")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".ts") || strings.HasSuffix(p, ".tsx")) || strings.Contains(p, ".test.") {
			return err
		}
		b, err := os.ReadFile(p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatalf("read the console's sources: %v", err)
	}
	return files
}

// TestConsoleSessionStates: the console's SessionState union is exactly
// the wire's Session states.
func TestConsoleSessionStates(t *testing.T) {
	src := consoleSource(t)[filepath.Join("..", "..", "console", "src", "api", "types.ts")]
	m := regexp.MustCompile(`export type SessionState =([^;]*);`).FindStringSubmatch(src)
	if m == nil {
		t.Fatal("console/src/api/types.ts declares no SessionState union")
	}
	var got []string
	for _, q := range regexp.MustCompile(`"([A-Z_]+)"`).FindAllStringSubmatch(m[1], -1) {
		got = append(got, q[1])
	}
	var want []string
	for _, s := range SessionStates {
		want = append(want, string(s))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the console's SessionState is %v, the wire's states %v", got, want)
	}
}

// TestConsoleChunkTypes: every chunk type the console's sources name is
// one of the wire's.
func TestConsoleChunkTypes(t *testing.T) {
	named := regexp.MustCompile(`["'](data-[a-z-]+|(?:text|reasoning|tool-input|tool-output)-[a-z]+|tool-approval-request|start-step|finish-step)["']`)
	seen := 0
	for p, src := range consoleSource(t) {
		for _, m := range named.FindAllStringSubmatch(src, -1) {
			seen++
			if !ChunkType(m[1]).Known() || (ChunkType(m[1]).IsData() && !knownData[ChunkType(m[1])]) {
				t.Errorf("%s names chunk type %q, which the wire does not define", p, m[1])
			}
		}
	}
	if seen == 0 {
		t.Fatal("the console's sources name no chunk type: the pattern is out of date")
	}
}

// knownData are the data-* chunk types the wire defines.
var knownData = map[ChunkType]bool{DataTurnAccepted: true, DataInputConsumed: true, DataInteraction: true, DataTurnFailure: true,
	DataTurnInterrupted: true, DataResult: true, DataResumeCursor: true, DataRetry: true, DataCompaction: true, DataModelError: true,
	DataStepBroken: true}
