package app

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/astrabox/astrabox/internal/bench"
)

// runBenchEgress is `astrabox bench egress`: what network mode limited
// (the egress proxy) costs a box's requests and downloads against mode
// unrestricted, measured in the boxes, in one run.
func runBenchEgress(ctx context.Context, args []string, stdio IO) error {
	fs := flag.NewFlagSet("bench egress", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	backends := fs.String("backends", "native", "sandbox backends, comma-separated: native, docker (needs --docker-image)")
	dockerImage := fs.String("docker-image", "", "image of the docker backend's boxes, present in the engine, with python3 (e.g. debian:12)")
	n := fs.Int("n", 200, "samples of each latency")
	size := fs.String("size", "256MiB", "bytes of each download (suffixes KiB, MiB, GiB)")
	repeat := fs.Int("repeat", 3, "rounds: each latency's samples are taken in this many rounds and each download made this many times (the median rate is reported), the modes taking turns")
	jsonOut := fs.String("json", "", "also write the results to this JSON file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	bytes, err := parseSize(*size)
	if err != nil {
		return err
	}
	var names []string
	for _, b := range strings.Split(*backends, ",") {
		if b = strings.TrimSpace(b); b != "" {
			names = append(names, b)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locate the astrabox binary: %w", err)
	}
	scratch, remove, err := benchScratch()
	if err != nil {
		return err
	}
	defer remove()
	rep, err := bench.RunEgress(ctx, bench.EgressConfig{Backends: names, Binary: exe, Dir: scratch, DockerImage: *dockerImage,
		N: max(*n, 1), Size: bytes, Repeat: max(*repeat, 1), Progress: stdio.Stderr})
	if len(rep.Rows) > 0 { // also after a failure: what was measured
		rep.WriteTable(stdio.Stdout)
	}
	if err != nil {
		return err
	}
	if *jsonOut != "" {
		return rep.WriteJSON(*jsonOut)
	}
	return nil
}
