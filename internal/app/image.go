package app

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/astrabox/astrabox/image"
	"github.com/astrabox/astrabox/provider/docker"
)

const imageUsage = `usage: astrabox image <command> [flags]

commands:
  import NAME FILE [--replace] [--max-bytes SIZE] [--platform OS/ARCH] [--docker]
                    import a root file system tarball, a docker-save archive
                    or an OCI image layout (directory or tar); gzip, zstd
                    and bzip2 compression are detected. --docker also loads a
                    root file system tarball into the Docker Engine (DOCKER_HOST
                    or the local socket) as NAME, for the docker backend
  pull REF [--name NAME] [--replace] [--insecure] [--max-bytes SIZE] [--platform OS/ARCH]
                    pull an image from an OCI registry (anonymously)
  ls [--json]       list images
  rm NAME           remove an image (no box may be running on it)
  prune             delete old versions left by --replace

every command takes --data-dir DIR (default: the server's; images in DIR/images)
and --log-level LEVEL (default warn)`

func runImage(ctx context.Context, args []string, stdio IO, env Env) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stdio.Stdout, imageUsage)
		return nil
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("image "+sub, flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	dataDir := fs.String("data-dir", defaultDataDir(env), "AstraBox's data directory (images are kept in DATA_DIR/images)")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	open := func() (*image.Store, error) {
		log, err := newLogger(stdio.Stderr, *logLevel)
		if err != nil {
			return nil, err
		}
		return image.Open(filepath.Join(*dataDir, "images"), log)
	}
	switch sub {
	case "import":
		replace := fs.Bool("replace", false, "replace an existing image of the same name")
		maxSize := fs.String("max-bytes", "", "largest content of the root file system (suffixes KiB, MiB, GiB; default: no limit)")
		plat := fs.String("platform", "", "platform to pick from a multi-platform archive (default linux/ARCH of this machine)")
		toDocker := fs.Bool("docker", false, "also load the root file system tarball into the Docker Engine as NAME")
		pos, err := parseInterleaved(fs, args, 2, "NAME FILE")
		if err != nil {
			return err
		}
		opts, err := importOptions(*replace, *maxSize, *plat)
		if err != nil {
			return err
		}
		st, err := open()
		if err != nil {
			return err
		}
		start := time.Now()
		info, err := st.Import(ctx, pos[0], pos[1], opts)
		if err != nil {
			return err
		}
		printStored(stdio.Stdout, "imported", info, time.Since(start))
		if *toDocker {
			if info.Format != image.FormatRootFS {
				return fmt.Errorf("--docker loads root file system tarballs only; %s is a %s (load it with docker load)", pos[1], info.Format)
			}
			return importToDocker(ctx, stdio, pos[0], pos[1])
		}
		return nil
	case "pull":
		name := fs.String("name", "", "name to store the image under (default: from REF, e.g. debian:bookworm)")
		replace := fs.Bool("replace", false, "replace an existing image of the same name")
		insecure := fs.Bool("insecure", false, "allow plain HTTP to the registry")
		maxSize := fs.String("max-bytes", "", "largest content of the root file system (suffixes KiB, MiB, GiB; default: no limit)")
		plat := fs.String("platform", "", "platform to pull (default linux/ARCH of this machine)")
		pos, err := parseInterleaved(fs, args, 1, "REF")
		if err != nil {
			return err
		}
		opts, err := importOptions(*replace, *maxSize, *plat)
		if err != nil {
			return err
		}
		st, err := open()
		if err != nil {
			return err
		}
		start := time.Now()
		info, err := st.Pull(ctx, pos[0], *name, image.PullOptions{ImportOptions: opts, Insecure: *insecure})
		if err != nil {
			return err
		}
		printStored(stdio.Stdout, "pulled", info, time.Since(start))
		return nil
	case "ls", "list":
		asJSON := fs.Bool("json", false, "print JSON")
		if _, err := parseInterleaved(fs, args, 0, ""); err != nil {
			return err
		}
		st, err := open()
		if err != nil {
			return err
		}
		infos, err := st.List(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(stdio.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(infos)
		}
		return printImages(stdio.Stdout, infos)
	case "rm", "remove":
		pos, err := parseInterleaved(fs, args, 1, "NAME")
		if err != nil {
			return err
		}
		st, err := open()
		if err != nil {
			return err
		}
		if err := st.Remove(ctx, pos[0]); err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdio.Stdout, "removed", pos[0])
		return err
	case "prune":
		if _, err := parseInterleaved(fs, args, 0, ""); err != nil {
			return err
		}
		st, err := open()
		if err != nil {
			return err
		}
		n, err := st.Prune(ctx)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdio.Stdout, "deleted %d old image versions\n", n)
		return err
	}
	return fmt.Errorf("unknown command %q\n\n%s", sub, imageUsage)
}

// parseInterleaved parses flags that may come before, between or after
// the positional arguments, and wants exactly n of those.
func parseInterleaved(fs *flag.FlagSet, args []string, n int, names string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if len(pos) != n {
		if n == 0 {
			return nil, fmt.Errorf("usage: astrabox %s [flags] (takes no arguments)", fs.Name())
		}
		return nil, fmt.Errorf("usage: astrabox %s %s [flags]", fs.Name(), names)
	}
	return pos, nil
}

func importOptions(replace bool, maxSize, plat string) (image.ImportOptions, error) {
	opts := image.ImportOptions{Replace: replace, Platform: plat}
	if maxSize != "" {
		n, err := parseSize(maxSize)
		if err != nil {
			return opts, fmt.Errorf("--max-bytes: %w", err)
		}
		opts.MaxBytes = n
	}
	return opts, nil
}

func printStored(w io.Writer, verb string, info image.Info, took time.Duration) {
	fmt.Fprintf(w, "%s %s (%s, %d layers, %s, %s) in %s\n", verb, info.Name, info.Format, info.Layers,
		humanSize(info.Size), shortDigest(info.Digest), took.Round(10*time.Millisecond))
}

func printImages(w io.Writer, infos []image.Info) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tFORMAT\tSIZE\tLAYERS\tCREATED\tDIGEST")
	for _, in := range infos {
		if in.BuiltIn {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\n", in.Name, in.Format)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", in.Name, in.Format, humanSize(in.Size), in.Layers,
			in.Created.Local().Format("2006-01-02 15:04"), shortDigest(in.Digest))
	}
	return tw.Flush()
}

func shortDigest(d string) string {
	algo, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) < 12 {
		return d
	}
	return algo + ":" + hex[:12]
}

func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[i])
}

// importToDocker loads the rootfs tarball file into the Docker Engine as
// name (the engine's import, which takes a root file system tarball).
func importToDocker(ctx context.Context, stdio IO, name, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	start := time.Now()
	if err := docker.ImportRootfs(ctx, docker.Config{FromEnv: true}, name, f); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Stdout, "loaded %s into the Docker Engine in %s\n", name, time.Since(start).Round(time.Millisecond))
	return nil
}
