package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/testenv"
)

func TestParseSamples(t *testing.T) {
	cases := []struct {
		name, out, mode string
		want            []int64
		err             string // in the error; "" for none
	}{
		{"one line", "fresh 120 340 56\n", "fresh", []int64{120, 340, 56}, ""},
		{"among other output", "warning: x\ndownload 1048576 2000000\n\n", "download", []int64{1048576, 2000000}, ""},
		{"the mode's line only", "dns 1 2\nfresh 3\n", "fresh", []int64{3}, ""},
		{"a mode is a whole word", "freshness 1\n", "fresh", nil, "no fresh line"},
		{"no samples", "keepalive\n", "keepalive", nil, "no samples"},
		{"not a number", "fresh 12 x3\n", "fresh", nil, `bad sample "x3"`},
		{"negative", "fresh -4\n", "fresh", nil, `bad sample "-4"`},
		{"nothing", "", "dns", nil, "no dns line"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSamples(tc.out, tc.mode)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestEgressRounds(t *testing.T) {
	cases := []struct {
		mode      string
		n, repeat int
		size      int64
		want      []int64
	}{
		{"fresh", 200, 3, 0, []int64{67, 67, 66}},
		{"dns", 2, 3, 0, []int64{1, 1}},
		{"keepalive", 5, 1, 0, []int64{5}},
		{"download", 200, 2, 1 << 20, []int64{1 << 20, 1 << 20}},
	}
	for _, tc := range cases {
		got := egressRounds(egressScenario{mode: tc.mode}, EgressConfig{N: tc.n, Repeat: tc.repeat, Size: tc.size})
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s n %d repeat %d: %v, want %v", tc.mode, tc.n, tc.repeat, got, tc.want)
		}
	}
}

func TestEgressRow(t *testing.T) {
	ms := int64(time.Millisecond)
	lat := egressRow(egressScenario{name: "x", mode: "fresh"}, "native", []int64{1 * ms, 2 * ms, 3 * ms}, []int64{2 * ms, 3 * ms, 5 * ms},
		[]int64{3 * ms, 4 * ms, 9 * ms})
	if lat.Unit != "ms" || lat.N != 3 || lat.Unrestricted.P50 != 2 || lat.Limited.P50 != 3 || lat.Added.P50 != 1 || lat.Added.P99 != 2 || lat.Ratio != 1.5 {
		t.Errorf("latency row %+v, added %+v", lat, lat.Added)
	}
	if lat.Credential == nil || lat.Credential.P50 != 4 || lat.CredentialAdded.P50 != 2 || lat.CredentialAdded.P99 != 6 || lat.CredentialRatio != 2 {
		t.Errorf("latency row with a credential %+v, added %+v", lat.Credential, lat.CredentialAdded)
	}
	// A lookup has no credential box.
	if dns := egressRow(egressScenario{name: "z", mode: "dns"}, "native", []int64{ms}, []int64{ms}, nil); dns.Credential != nil || dns.CredentialRatio != 0 {
		t.Errorf("lookup row %+v", dns)
	}
	// Downloads: pairs of bytes and ns; the median rate of each mode.
	dl := egressRow(egressScenario{name: "y", mode: "download"}, "native",
		[]int64{1e6, 1e9, 1e6, 4e9, 1e6, 2e9}, []int64{1e6, 4e9, 1e6, 4e9, 1e6, 2e9}, []int64{1e6, 8e9, 1e6, 8e9, 1e6, 8e9})
	if dl.Unit != "MB/s" || dl.N != 3 || dl.Bytes != 1e6 || dl.UnrestrictedRate != 0.5 || dl.LimitedRate != 0.25 || dl.Ratio != 0.5 ||
		dl.CredentialRate != 0.125 || dl.CredentialRatio != 0.25 {
		t.Errorf("download row %+v", dl)
	}
	var b bytes.Buffer
	EgressReport{Rows: []EgressRow{lat, dl}, Notes: []string{"a note"}}.WriteTable(&b)
	for _, want := range []string{"| x ", "2.000 / 3.000 / 3.000 ms", "+1.000 / +2.000 / +2.000 ms", "1.50x",
		"4.000 / 9.000 / 9.000 ms", "+2.000 / +6.000 / +6.000 ms", "2.00x",
		"3 × 1000000 B", "0.5 MB/s", "0.50x", "0.1 MB/s", "0.25x", "- a note"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table has no %q:\n%s", want, b.String())
		}
	}
}

func TestServeEgressUpstream(t *testing.T) {
	for _, tc := range []struct {
		path string
		code int
		size int
	}{{"/small", 200, 3}, {"/bytes/0", 200, 0}, {"/bytes/3000000", 200, 3000000}, {"/bytes/x", 404, -1}, {"/other", 404, -1}} {
		rec := httptest.NewRecorder()
		(&egressUpstream{}).serve(rec, httptest.NewRequest("GET", tc.path, nil))
		if rec.Code != tc.code || (tc.size >= 0 && rec.Body.Len() != tc.size) {
			t.Errorf("GET %s: %d with %d bytes, want %d with %d", tc.path, rec.Code, rec.Body.Len(), tc.code, tc.size)
		}
	}
}

// TestRunEgressSmoke runs `astrabox bench egress` small on the native
// backend: every row has its samples in each box (lookups in two), the
// limited boxes' traffic went through their proxy (RunEgress checks that
// the upstream got the credential box's secret), and the upstream's
// namespace is gone afterwards. No figure is checked. It needs root, iptables, ip and
// python3.
func TestRunEgressSmoke(t *testing.T) {
	testenv.NeedRoot(t)
	for _, c := range []string{"iptables", "ip", "python3"} {
		testenv.NeedCommand(t, c)
	}
	bin := testenv.AstraboxBinary(t)
	dir, err := os.MkdirTemp("", "astrabox-bench-egress-") // not t.TempDir: its parent is closed to box users
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := RunEgress(ctx, EgressConfig{Binary: bin, Dir: dir, N: 4, Size: 256 << 10, Repeat: 2, Progress: &progress})
	if err != nil {
		t.Fatalf("RunEgress: %v\nprogress:\n%s", err, progress.String())
	}
	if len(rep.Rows) != len(egressScenarios) {
		t.Fatalf("%d rows, want %d", len(rep.Rows), len(egressScenarios))
	}
	for _, r := range rep.Rows {
		ok := r.N > 0 && r.Ratio > 0
		switch {
		case strings.HasPrefix(r.Scenario, "DNS"):
			ok = ok && r.N == 4 && r.Limited != nil && r.Credential == nil
		case r.Unit == "ms":
			ok = ok && r.N == 4 && r.Unrestricted != nil && r.Limited != nil && r.Added != nil && r.Limited.P50 > 0 &&
				r.Credential != nil && r.Credential.P50 > 0 && r.CredentialRatio > 0
		default:
			ok = ok && r.N == 2 && r.Bytes == 256<<10 && r.UnrestrictedRate > 0 && r.LimitedRate > 0 && r.CredentialRate > 0
		}
		if !ok {
			t.Errorf("%s: samples missing: %+v", r.Scenario, r)
		}
	}
	if len(rep.Notes) != 2 || !strings.Contains(rep.Notes[0], "refused 0") || !strings.Contains(rep.Notes[1], "refused 0") {
		t.Errorf("notes: %q", rep.Notes)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), fmt.Sprintf("ablbench-%d", os.Getpid()%100000)) {
		t.Errorf("the upstream's namespace is left: %s", out)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	t.Log(table.String())
}
