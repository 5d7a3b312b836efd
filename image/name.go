package image

import (
	"strconv"
	"strings"

	"github.com/astrabox/astrabox/sandbox"
)

// HostName is the built-in image: the host's own root file system, which
// backends provide themselves. It cannot be imported, pulled or removed.
const HostName = "host"

// DefaultTag is the tag of a name given without one.
const DefaultTag = "latest"

// Limits of a name's parts. Together with the separator they keep a
// directory name within the 255 bytes a file name may have.
const (
	maxRepoLen = 126
	maxTagLen  = 128
)

// dirSep joins repository and tag in a directory name. It can appear in
// neither, so the mapping from names to directory names is one to one.
const dirSep = "+"

// Ref is a validated image name in Docker's reference syntax: a
// repository of "/"-separated components `[a-z0-9]+([._-][a-z0-9]+)*`, the
// first of which may be a registry host (with a dot or a port, or
// "localhost"), and a tag `[A-Za-z0-9_][A-Za-z0-9._-]*` or a digest
// `sha256:<64 hex>` (Tag is then "@" and the digest).
type Ref struct {
	Repo string
	Tag  string
}

// String is the canonical form "repo:tag", or "repo@sha256:..." for a
// digest.
func (r Ref) String() string {
	if strings.HasPrefix(r.Tag, "@") {
		return r.Repo + r.Tag
	}
	return r.Repo + ":" + r.Tag
}

// dirEscaper maps the characters a name may hold but a directory name of
// one component may not ("/", and ":" of a registry port or a digest)
// onto ones no name holds, so the mapping stays one to one.
var (
	dirEscaper   = strings.NewReplacer("/", "!", ":", "=")
	dirUnescaper = strings.NewReplacer("!", "/", "=", ":")
)

// dirName is the name of the image's directory in the store: a single path
// component that never starts with a dot. Plain names keep the form
// "repo+tag" the store has always used.
func (r Ref) dirName() string { return dirEscaper.Replace(r.Repo) + dirSep + dirEscaper.Replace(r.Tag) }

// IsHost reports whether r names the built-in host image.
func (r Ref) IsHost() bool { return r.Repo == HostName }

// ParseName validates s, Docker's reference syntax ("debian",
// "debian:bookworm", "opensandbox/code-interpreter:latest",
// "registry.example:5000/team/img@sha256:..."), and returns it with the
// tag defaulted to "latest". Invalid names are INVALID_REQUEST_BODY errors.
func ParseName(s string) (Ref, error) {
	repo, tag := s, DefaultTag
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		repo, tag = s[:i], s[i:]
		if !validDigest(tag[1:]) {
			return Ref{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid image digest in %q: want sha256: and 64 hex digits", s)
		}
	} else if i := strings.LastIndexByte(s, ':'); i > strings.LastIndexByte(s, '/') {
		repo, tag = s[:i], s[i+1:]
		if !validTag(tag) {
			return Ref{}, sandbox.Errorf(sandbox.CodeInvalidRequest,
				"invalid image tag in %q: want [A-Za-z0-9_][A-Za-z0-9._-]* (at most %d characters)", s, maxTagLen)
		}
	}
	if !validRepo(repo) {
		return Ref{}, sandbox.Errorf(sandbox.CodeInvalidRequest,
			"invalid image name %q: want [REGISTRY/]NAME[/NAME...][:TAG|@sha256:DIGEST], each NAME [a-z0-9]+ joined by . _ or - (at most %d characters)", s, maxRepoLen)
	}
	return Ref{Repo: repo, Tag: tag}, nil
}

// parseDirName is the inverse of Ref.dirName; ok is false for directory
// names the store did not make.
func parseDirName(s string) (Ref, bool) {
	repo, tag, ok := strings.Cut(s, dirSep)
	if !ok {
		return Ref{}, false
	}
	repo, tag = dirUnescaper.Replace(repo), dirUnescaper.Replace(tag)
	name := repo + ":" + tag
	if strings.HasPrefix(tag, "@") {
		name = repo + tag
	}
	ref, err := ParseName(name)
	if err != nil || ref.Repo != repo || ref.Tag != tag {
		return Ref{}, false
	}
	return ref, true
}

// validRepo checks a repository path: components separated by "/", the
// first of which may be a registry host.
func validRepo(s string) bool {
	if s == "" || len(s) > maxRepoLen {
		return false
	}
	parts := strings.Split(s, "/")
	for i, p := range parts {
		if i == 0 && len(parts) > 1 && isRegistry(p) {
			continue
		}
		if !validComponent(p) {
			return false
		}
	}
	return true
}

// validComponent checks one path component: [a-z0-9]+([._-]+[a-z0-9]+)*
// (Docker also allows "__"; runs of separators are allowed here too).
func validComponent(s string) bool {
	if s == "" || !isLowerAlnum(s[0]) || !isLowerAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isLowerAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// isRegistry reports whether a first component is a registry host:
// "localhost", or a host name with a dot or a port.
func isRegistry(s string) bool {
	host, port, hasPort := strings.Cut(s, ":")
	if host == "" || (!hasPort && host != "localhost" && !strings.Contains(host, ".")) {
		return false
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || !isAlnum(label[0]) || !isAlnum(label[len(label)-1]) {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !isAlnum(c) && c != '-' {
				return false
			}
		}
	}
	if hasPort {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return false
		}
	}
	return true
}

// validDigest checks "sha256:" and 64 lowercase hex digits.
func validDigest(s string) bool {
	hex, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func validTag(s string) bool {
	if s == "" || len(s) > maxTagLen || s[0] == '.' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isLowerAlnum(c) && !(c >= 'A' && c <= 'Z') && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool { return isLowerAlnum(c) || c >= 'A' && c <= 'Z' }

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
