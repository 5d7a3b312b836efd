package image

import (
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

// Ref is a validated image name: a repository `[a-z0-9][a-z0-9._-]*` and a
// tag `[A-Za-z0-9_][A-Za-z0-9._-]*`.
type Ref struct {
	Repo string
	Tag  string
}

// String is the canonical form "repo:tag".
func (r Ref) String() string { return r.Repo + ":" + r.Tag }

// dirName is the name of the image's directory in the store: a single path
// component that never starts with a dot.
func (r Ref) dirName() string { return r.Repo + dirSep + r.Tag }

// IsHost reports whether r names the built-in host image.
func (r Ref) IsHost() bool { return r.Repo == HostName }

// ParseName validates s, "repo" or "repo:tag", and returns it with the tag
// defaulted to "latest". Invalid names are INVALID_REQUEST_BODY errors.
func ParseName(s string) (Ref, error) {
	repo, tag, hasTag := strings.Cut(s, ":")
	if !hasTag {
		tag = DefaultTag
	}
	if !validRepo(repo) {
		return Ref{}, sandbox.Errorf(sandbox.CodeInvalidRequest,
			"invalid image name %q: want [a-z0-9][a-z0-9._-]* (at most %d characters) with an optional :tag", s, maxRepoLen)
	}
	if !validTag(tag) {
		return Ref{}, sandbox.Errorf(sandbox.CodeInvalidRequest,
			"invalid image tag in %q: want [A-Za-z0-9_][A-Za-z0-9._-]* (at most %d characters)", s, maxTagLen)
	}
	return Ref{Repo: repo, Tag: tag}, nil
}

// parseDirName is the inverse of Ref.dirName; ok is false for directory
// names the store did not make.
func parseDirName(s string) (Ref, bool) {
	repo, tag, ok := strings.Cut(s, dirSep)
	if !ok || !validRepo(repo) || !validTag(tag) {
		return Ref{}, false
	}
	return Ref{Repo: repo, Tag: tag}, true
}

func validRepo(s string) bool {
	if s == "" || len(s) > maxRepoLen || !isLowerAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isLowerAlnum(c) && c != '.' && c != '_' && c != '-' {
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

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
