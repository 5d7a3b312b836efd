package api

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/astrabox/astrabox/sandbox"
)

// The largest quantities that parse at all; the server's own bounds
// (lifecycle.Limits) are checked after parsing.
const (
	maxParsedMilliCPU = 1 << 20
	maxParsedBytes    = 1 << 50
)

// ParseCPU parses a Kubernetes CPU quantity ("500m", "2", "0.5") into
// millicores. Malformed or non-positive quantities are INVALID_REQUEST_BODY;
// ones beyond 1048576 millicores LIMIT_OUT_OF_RANGE.
func ParseCPU(s string) (int64, error) {
	s = strings.TrimSpace(s)
	var m float64
	if v, ok := strings.CutSuffix(s, "m"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid cpu quantity %q (e.g. \"500m\" or \"2\")", s)
		}
		m = float64(n)
	} else {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(f > 0) || math.IsInf(f, 0) {
			return 0, sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid cpu quantity %q (e.g. \"500m\" or \"2\")", s)
		}
		m = math.Ceil(f * 1000)
	}
	if m > maxParsedMilliCPU {
		return 0, sandbox.Errorf(sandbox.CodeLimitOutOfRange, "cpu quantity %q exceeds the largest accepted %dm", s, maxParsedMilliCPU)
	}
	return int64(m), nil
}

var byteSuffixes = []struct {
	suffix string
	mult   float64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// ParseBytes parses a Kubernetes memory quantity ("512Mi", "1Gi", "1G",
// "1048576") into bytes. Malformed or non-positive quantities are
// INVALID_REQUEST_BODY; ones beyond 1 PiB LIMIT_OUT_OF_RANGE.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num, mult := s, 1.0
	for _, u := range byteSuffixes {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = v, u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || !(f*mult >= 1) || math.IsInf(f, 0) {
		return 0, sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid memory quantity %q (e.g. \"512Mi\" or \"2Gi\")", s)
	}
	if f*mult > maxParsedBytes {
		return 0, sandbox.Errorf(sandbox.CodeLimitOutOfRange, "quantity %q exceeds the largest accepted 1Pi", s)
	}
	return int64(f * mult), nil
}

// parseResources maps resourceLimits onto sandbox.Resources. Known keys:
// cpu, memory, pids, disk (or ephemeral-storage); gpu asks for the gpu
// capability.
func parseResources(limits map[string]string) (sandbox.Resources, []sandbox.Capability, error) {
	var r sandbox.Resources
	var caps []sandbox.Capability
	for k, v := range limits {
		var err error
		switch k {
		case "cpu":
			r.MilliCPU, err = ParseCPU(v)
		case "memory":
			r.MemoryBytes, err = ParseBytes(v)
		case "disk", "ephemeral-storage", "storage":
			r.DiskBytes, err = ParseBytes(v)
		case "pids":
			r.PIDs, err = strconv.ParseInt(v, 10, 64)
			var numErr *strconv.NumError
			switch {
			case errors.As(err, &numErr) && errors.Is(numErr.Err, strconv.ErrRange) && !strings.HasPrefix(v, "-"):
				err = sandbox.Errorf(sandbox.CodeLimitOutOfRange, "pids limit %q exceeds the largest accepted %d", v, int64(math.MaxInt64))
			case err != nil || r.PIDs <= 0:
				err = sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid pids limit %q", v)
			}
		case "gpu", "nvidia.com/gpu":
			n, perr := strconv.Atoi(v)
			if perr != nil || n < 0 {
				err = sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid gpu count %q", v)
			} else if n > 0 {
				caps = append(caps, sandbox.CapGPU)
			}
		default:
			err = sandbox.Errorf(sandbox.CodeInvalidRequest, "unknown resource %q (known: cpu, memory, disk, pids, gpu)", k)
		}
		if err != nil {
			return r, nil, err
		}
	}
	return r, caps, nil
}
