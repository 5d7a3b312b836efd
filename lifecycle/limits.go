package lifecycle

import (
	"fmt"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// Limits bound what one sandbox may ask for. Every path that sets a
// sandbox's resources or lifetime checks them: a create (its request
// merged over its profile), a profile when it is stored or configured, a
// warm pool's box (planned like a create) and a renew's new expiry. A zero
// field sets no bound of the server's own; the absolute bounds below hold
// regardless. Refusals carry sandbox.CodeLimitOutOfRange and name the
// bound.
type Limits struct {
	MaxMilliCPU    int64 // 1000 = one core
	MaxMemoryBytes int64
	MaxPIDs        int64
	MaxDiskBytes   int64
	// MaxTimeout bounds a TTL, an idle timeout and how far ahead a renew
	// may move an expiry; at most MaxTimeoutCeiling.
	MaxTimeout time.Duration
}

// The absolute bounds. The minimums are what a box needs to start at all
// (init and execd run in it, under its limits); below them a backend
// would fail the create with an internal error. MaxTimeoutCeiling keeps
// every expiry representable (a time.Duration holds about 292 years).
const (
	MinMilliCPU       = 10 // the smallest CPU quota cgroups and Docker accept
	MinMemoryBytes    = 32 << 20
	MinPIDs           = 32
	MinDiskBytes      = 1 << 20
	MaxTimeoutCeiling = 10 * 365 * 24 * time.Hour
)

// Limits returns the bounds the service enforces on every sandbox.
func (s *Service) Limits() Limits { return s.cfg.Limits }

// WithDefaults returns l with every zero field taken from d.
func (l Limits) WithDefaults(d Limits) Limits {
	if l.MaxMilliCPU == 0 {
		l.MaxMilliCPU = d.MaxMilliCPU
	}
	if l.MaxMemoryBytes == 0 {
		l.MaxMemoryBytes = d.MaxMemoryBytes
	}
	if l.MaxPIDs == 0 {
		l.MaxPIDs = d.MaxPIDs
	}
	if l.MaxDiskBytes == 0 {
		l.MaxDiskBytes = d.MaxDiskBytes
	}
	if l.MaxTimeout == 0 {
		l.MaxTimeout = d.MaxTimeout
	}
	return l
}

// Validate refuses negative bounds, bounds below the minimums and a
// MaxTimeout beyond MaxTimeoutCeiling (a configuration error).
func (l Limits) Validate() error {
	for _, b := range []struct {
		name     string
		val, min int64
	}{
		{"maxCPU (millicores)", l.MaxMilliCPU, MinMilliCPU},
		{"maxMemory (bytes)", l.MaxMemoryBytes, MinMemoryBytes},
		{"maxPIDs", l.MaxPIDs, MinPIDs},
		{"maxDisk (bytes)", l.MaxDiskBytes, MinDiskBytes},
	} {
		if b.val != 0 && b.val < b.min {
			return fmt.Errorf("limits: %s %d is below the minimum %d", b.name, b.val, b.min)
		}
	}
	if l.MaxTimeout < 0 || l.MaxTimeout > MaxTimeoutCeiling {
		return fmt.Errorf("limits: maxTimeout must be 0 to %d seconds", int64(MaxTimeoutCeiling/time.Second))
	}
	return nil
}

// Timeout is the longest TTL (and idle timeout, and renew distance) the
// server accepts: MaxTimeout, or MaxTimeoutCeiling when none is set.
func (l Limits) Timeout() time.Duration {
	if l.MaxTimeout > 0 && l.MaxTimeout < MaxTimeoutCeiling {
		return l.MaxTimeout
	}
	return MaxTimeoutCeiling
}

// CheckResources refuses a nonzero resource below its minimum or above the
// server's bound. Zero means the backend's default and is not checked.
func (l Limits) CheckResources(r sandbox.Resources) error {
	for _, c := range []struct {
		name          string
		val, min, max int64
		format        func(int64) string
	}{
		{"cpu", r.MilliCPU, MinMilliCPU, l.MaxMilliCPU, formatCPU},
		{"memory", r.MemoryBytes, MinMemoryBytes, l.MaxMemoryBytes, formatBytes},
		{"pids", r.PIDs, MinPIDs, l.MaxPIDs, formatCount},
		{"disk", r.DiskBytes, MinDiskBytes, l.MaxDiskBytes, formatBytes},
	} {
		switch {
		case c.val == 0:
		case c.val < c.min:
			return sandbox.Errorf(sandbox.CodeLimitOutOfRange, "%s %s is below the minimum %s", c.name, c.format(c.val), c.format(c.min))
		case c.max > 0 && c.val > c.max:
			return sandbox.Errorf(sandbox.CodeLimitOutOfRange, "%s %s exceeds the server's maximum %s", c.name, c.format(c.val), c.format(c.max))
		}
	}
	return nil
}

// CheckTimeouts refuses a TTL or idle timeout beyond Timeout().
func (l Limits) CheckTimeouts(ttl, idle time.Duration) error {
	max := l.Timeout()
	for _, t := range []struct {
		name string
		val  time.Duration
	}{{"timeout", ttl}, {"idleTimeout", idle}} {
		if t.val > max {
			return sandbox.Errorf(sandbox.CodeLimitOutOfRange, "%s %ds exceeds the server's maximum %ds", t.name, int64(t.val/time.Second), int64(max/time.Second))
		}
	}
	return nil
}

// checkSpec is CheckResources and CheckTimeouts of a planned spec.
func (l Limits) checkSpec(spec sandbox.Spec) error {
	if err := l.CheckResources(spec.Resources); err != nil {
		return err
	}
	return l.CheckTimeouts(spec.Timeout, spec.IdleTimeout)
}

// checkProfile checks a profile's resources and timeouts.
func (l Limits) checkProfile(p Profile) error {
	if err := l.CheckResources(p.Resources); err != nil {
		return err
	}
	return l.CheckTimeouts(p.Timeout, p.IdleTimeout)
}

func formatCPU(m int64) string {
	if m%1000 == 0 {
		return fmt.Sprintf("%d", m/1000)
	}
	return fmt.Sprintf("%dm", m)
}

func formatCount(n int64) string { return fmt.Sprintf("%d", n) }

// formatBytes writes n in the largest binary unit that divides it, the
// notation resourceLimits accepts ("512Mi").
func formatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.suffix)
		}
	}
	return fmt.Sprintf("%d", n)
}
