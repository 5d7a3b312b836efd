package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
)

// ExecdConfig configures the execd benchmark.
type ExecdConfig struct {
	// Command is the argv prefix that runs the astrabox binary.
	Command []string
	// Dir is a scratch directory on the disk to measure (files of Size
	// bytes are written there).
	Dir string
	// N is the number of exec round trips.
	N int
	// Size is the size of the streamed output and of the transferred file.
	Size int64
	// Repeat is how often each transfer is repeated (the median is kept).
	Repeat int
	// Lines is how many lines `seq` prints for the per-line framing row
	// (default 3,000,000).
	Lines int
	// Progress receives one line per scenario.
	Progress io.Writer
}

// streamCommand writes Size bytes of 100-byte text lines.
const streamCommand = "yes 'astrabox-benchmark-line-0123456789abcdefghijklmnopqrstuvwxyz-0123456789abcdefghijklmnopqrstuvw' | head -c %d"

// RunExecd measures execd (in a box of the process backend: execd with no
// isolation, so the figures are execd's own cost) against doing the same
// directly on the host: exec round trip against fork+exec, streamed output
// against reading a pipe, upload and download against cp.
func RunExecd(ctx context.Context, cfg ExecdConfig) (Report, error) {
	rep := Report{Title: "execd against the host", Date: time.Now()}
	p, err := process.New(process.Config{Dir: filepath.Join(cfg.Dir, "boxes"), Command: cfg.Command})
	if err != nil {
		return rep, err
	}
	id := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	info, err := p.Create(ctx, id, sandbox.Spec{Image: "host"})
	if err != nil {
		return rep, fmt.Errorf("create box: %w", err)
	}
	defer p.Delete(context.WithoutCancel(ctx), id)
	c := connect(p, info)
	if err := c.WaitReady(ctx); err != nil {
		return rep, err
	}
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "bench: "+format+"\n", args...) }

	progress("exec round trip of `true`, %d times each", cfg.N)
	row, err := benchExec(ctx, c, cfg.N)
	if err != nil {
		return rep, err
	}
	rep.Rows = append(rep.Rows, row)

	progress("streamed stdout, %d bytes, as binary frames and as SSE", cfg.Size)
	row, err = benchStream(ctx, c, cfg.Size, cfg.Repeat, "binary frames", false)
	if err != nil {
		return rep, err
	}
	rep.Rows = append(rep.Rows, row)
	sseClient := connect(p, info, client.WithEventStream())
	row, err = benchStream(ctx, sseClient, cfg.Size, cfg.Repeat, "SSE + JSON, byte-exact: framing=bytes", false)
	if err != nil {
		return rep, err
	}
	rep.Rows = append(rep.Rows, row)
	lineClient := connect(p, info, client.WithLineFraming())
	row, err = benchStream(ctx, lineClient, cfg.Size, cfg.Repeat, "SSE + JSON, one event per line: OpenSandbox's framing", true)
	if err != nil {
		return rep, err
	}
	rep.Rows = append(rep.Rows, row)

	lines := cfg.Lines
	if lines <= 0 {
		lines = 3_000_000
	}
	progress("`seq 1 %d` streamed as one SSE event per line and byte-exact", lines)
	row, err = benchLines(ctx, lineClient, sseClient, lines, cfg.Repeat)
	if err != nil {
		return rep, err
	}
	rep.Rows = append(rep.Rows, row)

	progress("upload and download of a %d-byte file, %d times each", cfg.Size, cfg.Repeat)
	rows, err := benchTransfer(ctx, c, cfg)
	if err != nil {
		return rep, err
	}
	rep.Rows = append(rep.Rows, rows...)
	return rep, nil
}

func benchExec(ctx context.Context, c *client.Client, n int) (Row, error) {
	var box, host []time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		ex, err := c.Run(ctx, wire.RunCommandRequest{Command: "true"})
		if err != nil {
			return Row{}, fmt.Errorf("exec: %w", err)
		}
		if ex.ExitCode != 0 {
			return Row{}, fmt.Errorf("exec: exit code %d", ex.ExitCode)
		}
		box = append(box, time.Since(start))
		start = time.Now()
		if err := exec.CommandContext(ctx, "bash", "-c", "true").Run(); err != nil {
			return Row{}, fmt.Errorf("host exec: %w", err)
		}
		host = append(host, time.Since(start))
	}
	bl, hl := summarize(box), summarize(host)
	return Row{Scenario: "exec round trip of `true` (p50)", Unit: "ms", Subject: bl.P50, Alternative: hl.P50,
		AltName: "fork+exec of bash -c true on the host (execd's shell)", Latency: &bl, AltLatency: &hl}, nil
}

// benchStream measures streamed stdout; lines tells that c was made
// WithLineFraming.
func benchStream(ctx context.Context, c *client.Client, size int64, repeat int, encoding string, lines bool) (Row, error) {
	command := fmt.Sprintf(streamCommand, size)
	var box, host []float64
	for i := 0; i < repeat; i++ {
		var got int64
		start := time.Now()
		err := c.RunStream(ctx, wire.RunCommandRequest{Command: command}, func(ev client.Event) error {
			if ev.Type == wire.EventStdout {
				got += int64(len(ev.Text))
				if lines && ev.Text != "\n" {
					got++ // the terminator the line framing strips
				}
			}
			return nil
		})
		if lines && got == size+1 {
			got = size // the last line had no terminator
		}
		if err != nil || got != size {
			return Row{}, fmt.Errorf("stream: got %d of %d bytes: %v", got, size, err)
		}
		box = append(box, mbps(size, time.Since(start)))

		start = time.Now()
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		out, err := cmd.StdoutPipe()
		if err != nil {
			return Row{}, err
		}
		if err := cmd.Start(); err != nil {
			return Row{}, fmt.Errorf("host stream: %w", err)
		}
		n, _ := io.Copy(io.Discard, out)
		if err := cmd.Wait(); err != nil || n != size {
			return Row{}, fmt.Errorf("host stream: %d bytes: %v", n, err)
		}
		host = append(host, mbps(size, time.Since(start)))
	}
	return Row{Scenario: "streamed stdout (" + encoding + ")", Unit: "MB/s", Subject: median(box), Alternative: median(host),
		AltName: "reading the command's pipe on the host"}, nil
}

// benchLines times `seq 1 n` streamed as one SSE event per line (lines,
// a client WithLineFraming) against the same output as byte-exact SSE
// (exact): the cost of OpenSandbox's framing on many short lines.
func benchLines(ctx context.Context, lines, exact *client.Client, n, repeat int) (Row, error) {
	command := fmt.Sprintf("seq 1 %d", n)
	run := func(c *client.Client, wantEvents bool) (float64, error) {
		events := 0
		start := time.Now()
		err := c.RunStream(ctx, wire.RunCommandRequest{Command: command}, func(ev client.Event) error {
			if ev.Type == wire.EventStdout {
				events++
			}
			return nil
		})
		elapsed := time.Since(start).Seconds()
		if err != nil || (wantEvents && events != n) {
			return 0, fmt.Errorf("stream %q: %d events: %v", command, events, err)
		}
		return elapsed, nil
	}
	var box, alt []float64
	for i := 0; i < repeat; i++ {
		s, err := run(lines, true)
		if err != nil {
			return Row{}, err
		}
		box = append(box, s)
		if s, err = run(exact, false); err != nil {
			return Row{}, err
		}
		alt = append(alt, s)
	}
	return Row{Scenario: fmt.Sprintf("`seq 1 %d` streamed, one SSE event per line (wall time)", n), Unit: "s",
		Subject: median(box), Alternative: median(alt), AltName: "the same output as byte-exact SSE"}, nil
}

func benchTransfer(ctx context.Context, c *client.Client, cfg ExecdConfig) ([]Row, error) {
	src := filepath.Join(cfg.Dir, "bench-src.bin")
	if err := writeRandomFile(src, cfg.Size); err != nil {
		return nil, err
	}
	defer os.Remove(src)
	cpDst := filepath.Join(cfg.Dir, "bench-cp.bin")
	downDst := filepath.Join(cfg.Dir, "bench-down.bin")
	defer os.Remove(cpDst)
	defer os.Remove(downDst)

	var up, down, cp []float64
	for i := 0; i < cfg.Repeat; i++ {
		start := time.Now()
		// cp, then fsync of the copy: the same durability an upload has.
		if out, err := exec.CommandContext(ctx, "sh", "-c", `cp "$1" "$2" && sync "$2"`, "sh", src, cpDst).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("cp: %v: %s", err, out)
		}
		cp = append(cp, mbps(cfg.Size, time.Since(start)))
		_ = os.Remove(cpDst)

		f, err := os.Open(src)
		if err != nil {
			return nil, err
		}
		size := cfg.Size
		start = time.Now()
		err = c.Upload(ctx, "bench-up.bin", f, client.UploadOptions{Size: &size})
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("upload: %w", err)
		}
		up = append(up, mbps(cfg.Size, time.Since(start)))

		start = time.Now()
		rc, err := c.Download(ctx, "bench-up.bin", 0, -1)
		if err != nil {
			return nil, fmt.Errorf("download: %w", err)
		}
		out, err := os.Create(downDst)
		if err != nil {
			rc.Close()
			return nil, err
		}
		n, err := io.Copy(out, rc)
		rc.Close()
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil || n != cfg.Size {
			return nil, fmt.Errorf("download: %d of %d bytes: %v", n, cfg.Size, err)
		}
		down = append(down, mbps(cfg.Size, time.Since(start)))
		_ = os.Remove(downDst)
	}
	return []Row{
		{Scenario: "upload (streamed, size-verified, fsynced)", Unit: "MB/s", Subject: median(up), Alternative: median(cp), AltName: "cp + fsync on the same disk"},
		{Scenario: "download (written to a local file)", Unit: "MB/s", Subject: median(down), Alternative: median(cp), AltName: "cp + fsync on the same disk"},
	}, nil
}

// writeRandomFile writes size pseudo-random bytes to path.
func writeRandomFile(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.NewChaCha8([32]byte{'a', 's', 't', 'r', 'a'})
	if _, err := io.CopyN(w, rng, size); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func mbps(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
