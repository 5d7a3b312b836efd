package docker

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/sandbox"
)

// defaultRegistry is the registry of a reference that names none.
const defaultRegistry = "docker.io"

// registryHost returns the registry host (with its port, if any) of an
// image reference, by Docker's rule: the first "/"-separated component
// names a registry when it has a dot or a port or is "localhost";
// otherwise the image is Docker Hub's.
func registryHost(ref string) string {
	first, _, hasSlash := strings.Cut(ref, "/")
	if !hasSlash || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		return defaultRegistry
	}
	return first
}

// blockedPrefixes are the ranges a pull must not reach unless the config
// allows the registry: the engine pulls as root from the host's network, so
// a registry there would be a way from the API to the host's loopback, the
// cloud metadata service or the private network.
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"), netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("224.0.0.0/4"), netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/128"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"), netip.MustParsePrefix("ff00::/8"),
}

// blockedAddr reports whether a is in a blocked range, IPv4-mapped IPv6
// addresses unmapped first.
func blockedAddr(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range blockedPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// checkRegistry refuses a pull of ref from a registry that resolves (with
// the host's resolver) to a blocked range, unless the registry is one of
// allowed (host or host:port, as written in references). The engine
// resolves the name again when it pulls; a name that answers differently
// the second time gets past this check, so the allow-list is the control
// for private registries, and this the guard for everything else.
func checkRegistry(ctx context.Context, ref string, allowed []string, resolver *net.Resolver) error {
	host := registryHost(ref)
	if slices.Contains(allowed, host) {
		return nil
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if resolver == nil {
			resolver = net.DefaultResolver
		}
		if addrs, err = resolver.LookupNetIP(ctx, "ip", name); err != nil {
			return sandbox.Errorf(sandbox.CodeImageNotFound, "image %q: its registry %s does not resolve", ref, host)
		}
	}
	for _, a := range addrs {
		if blockedAddr(a) {
			return sandbox.Errorf(sandbox.CodeInvalidRequest,
				"image %q: registry %s is on a loopback, link-local or private address, which pulls may not reach unless the server's config allows it (docker.allowRegistries)", ref, host)
		}
	}
	return nil
}

// pullFailure is what a client learns of a failed pull: the kind of
// failure, never the registry's own answer (which the engine quotes in its
// error and which may be a page of an internal service); the whole error
// goes to the server's log.
func pullFailure(ref string, err error) error {
	return sandbox.Errorf(sandbox.CodeImageNotFound, "image %q is not on the Docker engine and pulling it failed (%s; the server's log has the engine's error)", ref, pullReason(err))
}

func pullReason(err error) string {
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "not found") || strings.Contains(msg, "manifest unknown"):
		return "not found in its registry"
	case strings.Contains(msg, "unauthorized") || strings.Contains(msg, "denied"):
		return "the registry refused access"
	case strings.Contains(msg, "timeout") || strings.Contains(msg, "deadline"):
		return "timed out"
	}
	return "the registry could not be reached or refused the pull"
}
