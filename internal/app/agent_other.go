//go:build !linux

package app

// keepProgramPrivate has nothing to do where boxes are not Linux processes.
func keepProgramPrivate() error { return nil }
