package app

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/astrabox/astrabox/internal/server/servertest"
)

// TestCpOutIsBounded: `astrabox cp` out of a box refuses a file over the
// limit (a sparse file declaring terabytes among them) and what is not a
// regular file before writing anything, keeps a sparse file's holes, and
// leaves no partial file behind.
func TestCpOutIsBounded(t *testing.T) {
	env := servertest.New(t, servertest.Options{})
	var sb struct {
		ID string `json:"id"`
	}
	env.Must(202, "POST", "/v1/sandboxes", map[string]any{"timeout": 600, "entrypoint": []string{"sleep", "infinity"}}, &sb)
	dir := t.TempDir()
	in := "/tmp/astrabox-cp-test-" + sb.ID
	setup := "mkdir -p " + in + " && cd " + in + " && truncate -s 8T huge && truncate -s 3M sparse && " +
		"printf middle | dd of=sparse bs=1 seek=1500000 conv=notrunc status=none && mkfifo fifo"
	if r := runCLI(t, env, "", "exec", sb.ID, "--", "bash", "-c", setup); r.code != 0 {
		t.Fatalf("setup: %d %s", r.code, r.stderr)
	}
	t.Cleanup(func() { _ = os.RemoveAll(in) })

	for _, tc := range []struct {
		name, src, want string
		args            []string
	}{
		{"huge", in + "/huge", "over the limit", nil},
		{"over-a-set-limit", in + "/sparse", "over the limit", []string{"--max-size", "1MiB"}},
		{"fifo", in + "/fifo", "not a regular file", nil},
		{"missing", in + "/nothing", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(dir, tc.name)
			r := runCLI(t, env, "", append(append([]string{"cp"}, tc.args...), sb.ID+":"+tc.src, dst)...)
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("cp %s: exit %d, stderr %q; want a refusal with %q", tc.src, r.code, r.stderr, tc.want)
			}
			if _, err := os.Stat(dst); !os.IsNotExist(err) {
				t.Fatalf("a refused copy left %s behind: %v", dst, err)
			}
		})
	}

	dst := filepath.Join(dir, "sparse")
	if r := runCLI(t, env, "", "cp", sb.ID+":"+in+"/sparse", dst); r.code != 0 {
		t.Fatalf("cp sparse: %d %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 3<<20 || string(b[1500000:1500006]) != "middle" || strings.Trim(string(b[:1500000]), "\x00") != "" {
		t.Fatalf("the copy differs: %d bytes", len(b))
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dst, &st); err != nil {
		t.Fatal(err)
	}
	if allocated := st.Blocks * 512; allocated >= 1<<20 {
		t.Fatalf("the copy of a 3 MiB file with 6 bytes of data takes %d bytes on disk: its holes were written", allocated)
	}
}
