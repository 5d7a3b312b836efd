package app

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	execdclient "github.com/astrabox/astrabox/execd/client"
	execdwire "github.com/astrabox/astrabox/execd/wire"
)

// runTTY runs argv (or the box's shell) on a terminal in the box and wires
// it to this process's terminal: raw mode, window size changes, and the
// exit code of the program as this command's.
func runTTY(ctx context.Context, x *execdclient.Client, argv []string, stdio IO) error {
	req := execdwire.CreatePTYRequest{}
	if len(argv) > 0 {
		req.Command = shellJoin(argv)
	}
	id, err := x.CreatePTY(ctx, req)
	if err != nil {
		return err
	}
	defer x.DeletePTY(context.WithoutCancel(ctx), id)

	in, _ := stdio.Stdin.(*os.File)
	cols, rows := 80, 24
	if in != nil {
		if ws, err := unix.IoctlGetWinsize(int(in.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			cols, rows = int(ws.Col), int(ws.Row)
		}
	}
	conn, err := x.AttachPTY(ctx, id, execdclient.AttachOptions{Cols: cols, Rows: rows})
	if err != nil {
		return err
	}
	defer conn.Close()
	if in != nil {
		if restore, err := makeRaw(int(in.Fd())); err == nil {
			defer restore()
		}
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if ws, err := unix.IoctlGetWinsize(int(in.Fd()), unix.TIOCGWINSZ); err == nil {
					_ = conn.Resize(ctx, int(ws.Col), int(ws.Row))
				}
			}
		}()
	}
	go func() { _, _ = io.Copy(conn, stdio.Stdin) }()
	for {
		f, err := conn.Next(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
		if f.Control != nil {
			if f.Control.Type == "exit" {
				if f.Control.ExitCode != nil && *f.Control.ExitCode != 0 {
					return exitCode(*f.Control.ExitCode)
				}
				return nil
			}
			continue
		}
		if _, err := stdio.Stdout.Write(f.Data); err != nil {
			return err
		}
	}
}

// makeRaw puts the terminal fd in raw mode and returns how to restore it.
func makeRaw(fd int) (func(), error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}
