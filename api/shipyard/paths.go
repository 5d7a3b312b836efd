package shipyard

import (
	"net/http"
	"path"
	"strings"
)

// Workspace is the directory every path of the API is relative to.
const Workspace = "/workspace"

// resolvePath turns a client's path into the absolute path in the box it
// names, by the API's rules:
//
//   - a relative path is relative to /workspace ("a/b" is /workspace/a/b,
//     "" and "." are /workspace);
//   - "workspace/x" and "/workspace/x" both mean /workspace/x, because
//     clients strip or keep the leading "/" of a path they were shown
//     (AstrBot strips it);
//   - any other absolute path, a path that leaves /workspace once "." and
//     ".." are resolved, and a NUL byte are refused with invalid_path.
//
// The check is lexical: a symbolic link inside the workspace may point
// anywhere in the box, which is the sandbox's own business.
func resolvePath(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", invalidPath(p, "it contains a NUL byte")
	}
	rel := p
	switch {
	case p == Workspace || strings.HasPrefix(p, Workspace+"/"):
		rel = strings.TrimPrefix(p, Workspace)
	case strings.HasPrefix(p, "/"):
		return "", invalidPath(p, "absolute paths must be under "+Workspace)
	case p == "workspace" || strings.HasPrefix(p, "workspace/"):
		rel = strings.TrimPrefix(p, "workspace")
	}
	rel = strings.TrimLeft(rel, "/")
	// Joined to the root, every ".." is resolved: a path that climbs out
	// shows up as one that no longer starts with the workspace.
	if !localPath(rel) {
		return "", invalidPath(p, "it leaves "+Workspace)
	}
	return path.Join(Workspace, rel), nil
}

// localPath reports whether rel, a relative slash path, stays within its
// root when "." and ".." are resolved one element at a time.
func localPath(rel string) bool {
	depth := 0
	for _, el := range strings.Split(rel, "/") {
		switch el {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return false
			}
		default:
			depth++
		}
	}
	return true
}

// relPath is abs (under /workspace) as the API shows it: relative to
// /workspace, "." for the workspace itself, and absolute when the relative
// form would begin with "workspace" (which resolvePath reads as the
// workspace itself), so that what is shown always resolves back to abs.
func relPath(abs string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(abs, Workspace), "/")
	switch {
	case rel == "":
		return "."
	case rel == "workspace" || strings.HasPrefix(rel, "workspace/"):
		return abs
	}
	return rel
}

func invalidPath(p, why string) *Error {
	e := newError(http.StatusBadRequest, codeInvalidPath, "invalid path "+quote(p)+": "+why)
	e.Details = map[string]any{"path": p}
	return e
}

// quote quotes s for a message, shortened to 200 bytes.
func quote(s string) string {
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}
