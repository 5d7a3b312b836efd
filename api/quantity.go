package api

import (
	"math"
	"strconv"
	"strings"

	"github.com/astrabox/astrabox/sandbox"
)

// parseCPU parses a Kubernetes CPU quantity ("500m", "2", "0.5") into
// millicores.
func parseCPU(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if v, ok := strings.CutSuffix(s, "m"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n > 1<<20 {
			return 0, sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid cpu quantity %q (e.g. \"500m\" or \"2\")", s)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || f > 1024 || math.IsNaN(f) {
		return 0, sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid cpu quantity %q (e.g. \"500m\" or \"2\")", s)
	}
	return int64(math.Ceil(f * 1000)), nil
}

var byteSuffixes = []struct {
	suffix string
	mult   float64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// parseBytes parses a Kubernetes memory quantity ("512Mi", "1Gi", "1G",
// "1048576") into bytes.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num, mult := s, 1.0
	for _, u := range byteSuffixes {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = v, u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f <= 0 || math.IsNaN(f) || math.IsInf(f, 0) || f*mult > 1<<50 {
		return 0, sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid memory quantity %q (e.g. \"512Mi\" or \"2Gi\")", s)
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
			r.MilliCPU, err = parseCPU(v)
		case "memory":
			r.MemoryBytes, err = parseBytes(v)
		case "disk", "ephemeral-storage", "storage":
			r.DiskBytes, err = parseBytes(v)
		case "pids":
			r.PIDs, err = strconv.ParseInt(v, 10, 64)
			if err != nil || r.PIDs <= 0 {
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
