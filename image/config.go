package image

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/sandbox"
)

// Config is the part of an image's configuration that says how to run it,
// taken from the image config of a docker-save archive, an OCI layout or a
// registry. A root file system tarball has none.
type Config struct {
	Env          []string          `json:"env,omitempty"`
	Entrypoint   []string          `json:"entrypoint,omitempty"`
	Cmd          []string          `json:"cmd,omitempty"`
	WorkingDir   string            `json:"working_dir,omitempty"`
	User         string            `json:"user,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	ExposedPorts []string          `json:"exposed_ports,omitempty"`
	StopSignal   string            `json:"stop_signal,omitempty"`
}

// configFile is the image config JSON (OCI and Docker spell it alike).
type configFile struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant"`
	Config       struct {
		Env          []string            `json:"Env"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		WorkingDir   string              `json:"WorkingDir"`
		User         string              `json:"User"`
		Labels       map[string]string   `json:"Labels"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		StopSignal   string              `json:"StopSignal"`
	} `json:"config"`
}

// parseConfig reads an image config; it returns the run configuration and
// the image's platform ("os/arch[/variant]", empty when unstated).
func parseConfig(raw []byte) (*Config, string, error) {
	var cf configFile
	if err := json.Unmarshal(raw, &cf); err != nil {
		return nil, "", sandbox.Errorf(sandbox.CodeInvalidRequest, "parse image config: %v", err)
	}
	c := cf.Config
	cfg := &Config{
		Env: c.Env, Entrypoint: c.Entrypoint, Cmd: c.Cmd, WorkingDir: c.WorkingDir,
		User: c.User, Labels: c.Labels, StopSignal: c.StopSignal,
	}
	for p := range c.ExposedPorts {
		cfg.ExposedPorts = append(cfg.ExposedPorts, p)
	}
	slices.Sort(cfg.ExposedPorts)
	var plat string
	if cf.OS != "" || cf.Architecture != "" {
		plat = platform{OS: cf.OS, Arch: cf.Architecture, Variant: cf.Variant}.String()
	}
	return cfg, plat, nil
}

// platform is an OS and CPU architecture, as in "linux/amd64" or
// "linux/arm/v7".
type platform struct {
	OS, Arch, Variant string
}

func (p platform) String() string {
	s := p.OS + "/" + p.Arch
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// matches reports whether an image for q runs as p asks: same OS and
// architecture, and the same variant when p names one.
func (p platform) matches(q platform) bool {
	return p.OS == q.OS && p.Arch == q.Arch && (p.Variant == "" || p.Variant == q.Variant)
}

// defaultPlatform is the platform of the running binary.
func defaultPlatform() platform { return platform{OS: "linux", Arch: runtime.GOARCH} }

// parsePlatform parses "os/arch[/variant]"; empty means defaultPlatform.
func parsePlatform(s string) (platform, error) {
	if s == "" {
		return defaultPlatform(), nil
	}
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return platform{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid platform %q: want os/arch[/variant]", s)
	}
	p := platform{OS: parts[0], Arch: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}

// checkPlatform logs when an image's config names another platform than
// the one asked for: the import goes on, but the image may not run.
func (b *build) checkPlatform(imagePlatform string) {
	if imagePlatform == "" {
		return
	}
	want := b.platform.String()
	if got, err := parsePlatform(imagePlatform); err == nil && !b.platform.matches(got) {
		b.s.log.Warn("image is built for another platform", "image", b.ref.String(), "platform", imagePlatform, "want", want)
	}
}

// setConfig records an image config in the build's Info.
func (b *build) setConfig(raw []byte) error {
	cfg, plat, err := parseConfig(raw)
	if err != nil {
		return err
	}
	b.info.Config = cfg
	b.info.Platform = plat
	b.checkPlatform(plat)
	return nil
}

func describeCandidates(ds []descriptor) string {
	var names []string
	for _, d := range ds {
		if d.Platform != nil {
			names = append(names, d.Platform.String())
		} else {
			names = append(names, d.Digest)
		}
	}
	return fmt.Sprintf("[%s]", strings.Join(names, ", "))
}
