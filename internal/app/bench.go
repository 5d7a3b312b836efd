package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/astrabox/astrabox/internal/bench"
)

func runBench(ctx context.Context, args []string, stdio IO, env Env) error {
	if len(args) > 0 && args[0] == "native" {
		return runBenchNative(ctx, args[1:], stdio)
	}
	if len(args) > 0 && args[0] == "api" {
		return runBenchAPI(ctx, args[1:], stdio)
	}
	if len(args) == 0 || args[0] != "execd" {
		return errors.New("usage: astrabox bench execd|native|api [flags]")
	}
	fs := flag.NewFlagSet("bench execd", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	n := fs.Int("n", 200, "exec round trips")
	size := fs.String("size", "1GiB", "bytes streamed and transferred (suffixes KiB, MiB, GiB)")
	repeat := fs.Int("repeat", 3, "repetitions of each transfer (the median is reported)")
	dir := fs.String("dir", "", "scratch directory on the disk to measure (default: a new temporary directory)")
	jsonOut := fs.String("json", "", "also write the results to this JSON file")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	bytes, err := parseSize(*size)
	if err != nil {
		return err
	}
	return runBenchmark(stdio, *dir, *jsonOut, func(exe, scratch string) (bench.Report, error) {
		return bench.RunExecd(ctx, bench.ExecdConfig{
			Command: []string{exe}, Dir: scratch, N: max(*n, 1), Size: bytes, Repeat: max(*repeat, 1), Progress: stdio.Stderr,
		})
	})
}

// runBenchmark runs one benchmark with the astrabox binary and a scratch
// directory (dir, or a new temporary one traversable by the unprivileged
// users boxes run as, removed afterwards), prints its table and writes its
// JSON when jsonOut is set.
func runBenchmark(stdio IO, dir, jsonOut string, run func(exe, scratch string) (bench.Report, error)) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locate the astrabox binary: %w", err)
	}
	scratch := dir
	if scratch == "" {
		if scratch, err = os.MkdirTemp("", "astrabox-bench-"); err != nil {
			return fmt.Errorf("scratch dir: %w", err)
		}
		defer os.RemoveAll(scratch)
		if err := os.Chmod(scratch, 0o711); err != nil {
			return fmt.Errorf("scratch dir: %w", err)
		}
	}
	rep, err := run(exe, scratch)
	if err != nil {
		return err
	}
	rep.WriteTable(stdio.Stdout)
	if jsonOut != "" {
		return rep.WriteJSON(jsonOut)
	}
	return nil
}

// parseSize parses "123", "16KiB", "64MiB", "1GiB".
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	num, mult := s, int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("invalid size %q (want e.g. 64MiB)", s)
	}
	return v * mult, nil
}

func runBenchNative(ctx context.Context, args []string, stdio IO) error {
	fs := flag.NewFlagSet("bench native", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	n := fs.Int("n", 50, "samples of each latency")
	concurrent := fs.Int("concurrent", 100, "boxes created at once")
	cycles := fs.Int("cycles", 1000, "create/delete cycles of the leak check")
	jsonOut := fs.String("json", "", "also write the results to this JSON file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return runBenchmark(stdio, "", *jsonOut, func(exe, scratch string) (bench.Report, error) {
		return bench.RunNative(ctx, bench.NativeConfig{Command: []string{exe}, Dir: scratch, N: max(*n, 1),
			Concurrent: max(*concurrent, 1), Cycles: max(*cycles, 0), Progress: stdio.Stderr})
	})
}

func runBenchAPI(ctx context.Context, args []string, stdio IO) error {
	fs := flag.NewFlagSet("bench api", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	n := fs.Int("n", 50, "samples of each latency")
	concurrent := fs.Int("concurrent", 100, "sandboxes created at once")
	jsonOut := fs.String("json", "", "also write the results to this JSON file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return runBenchmark(stdio, "", *jsonOut, func(exe, scratch string) (bench.Report, error) {
		return bench.RunAPI(ctx, bench.APIConfig{Command: []string{exe}, Dir: scratch, N: max(*n, 1),
			Concurrent: max(*concurrent, 1), Progress: stdio.Stderr})
	})
}
