package app

import (
	"context"
	"errors"

	"github.com/astrabox/astrabox/provider/native"
)

type exitCode int

func (e exitCode) Error() string { return "exit status" }
func (e exitCode) ExitCode() int { return int(e) }

func runInit(_ context.Context, args []string, stdio IO, _ Env) error {
	if len(args) > 0 {
		return errors.New("init takes no arguments")
	}
	if code := native.RunInit(stdio.Stderr); code != 0 {
		return exitCode(code)
	}
	return nil
}
