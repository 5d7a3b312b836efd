package execd

import (
	"cmp"
	"net/http"
	"os"
	"os/user"
	"slices"
	"strconv"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// Default modes, as octal digits, where a request leaves mode at 0.
const (
	defaultFileMode = 644
	defaultDirMode  = 755
)

// parseMode converts a mode written as octal digits in a decimal number
// (755, 4755) into an os.FileMode, mapping setuid, setgid and sticky. Any
// digit above 7, a negative mode or one above 7777 is refused with code.
func parseMode(m int, code sandbox.Code) (os.FileMode, error) {
	if m < 0 || m > 7777 {
		return 0, sandbox.Errorf(code, "mode %d is out of range; write it as octal digits, e.g. 644 or 755", m)
	}
	var v uint32
	for mult, n := uint32(1), m; n > 0; mult, n = mult*8, n/10 {
		d := n % 10
		if d > 7 {
			return 0, sandbox.Errorf(code, "mode %d has the digit %d; write it as octal digits, e.g. 644 or 755", m, d)
		}
		v += uint32(d) * mult
	}
	fm := os.FileMode(v & 0o777)
	if v&0o4000 != 0 {
		fm |= os.ModeSetuid
	}
	if v&0o2000 != 0 {
		fm |= os.ModeSetgid
	}
	if v&0o1000 != 0 {
		fm |= os.ModeSticky
	}
	return fm, nil
}

// modeDigits is the inverse of parseMode: 0755 becomes 755.
func modeDigits(fm os.FileMode) int {
	v := uint64(fm.Perm())
	if fm&os.ModeSetuid != 0 {
		v |= 0o4000
	}
	if fm&os.ModeSetgid != 0 {
		v |= 0o2000
	}
	if fm&os.ModeSticky != 0 {
		v |= 0o1000
	}
	n, _ := strconv.Atoi(strconv.FormatUint(v, 8))
	return n
}

// lookupIDs resolves an owner and a group, each a name or a numeric id, to
// ids; "" is -1 (unchanged). An unknown name is refused with code.
func lookupIDs(owner, group string, code sandbox.Code) (uid, gid int, err error) {
	uid, gid = -1, -1
	if owner != "" {
		if uid, err = lookupID(owner, "user", code); err != nil {
			return -1, -1, err
		}
	}
	if group != "" {
		if gid, err = lookupID(group, "group", code); err != nil {
			return -1, -1, err
		}
	}
	return uid, gid, nil
}

func lookupID(name, kind string, code sandbox.Code) (int, error) {
	if n, err := strconv.ParseUint(name, 10, 31); err == nil {
		return int(n), nil
	}
	var id string
	if kind == "user" {
		u, err := user.Lookup(name)
		if err != nil {
			return -1, sandbox.Errorf(code, "unknown user %q: %v", name, err)
		}
		id = u.Uid
	} else {
		g, err := user.LookupGroup(name)
		if err != nil {
			return -1, sandbox.Errorf(code, "unknown group %q: %v", name, err)
		}
		id = g.Gid
	}
	n, err := strconv.Atoi(id)
	if err != nil {
		return -1, sandbox.Errorf(code, "%s %q has the non-numeric id %q", kind, name, id)
	}
	return n, nil
}

// permChange is a validated Permission for one path.
type permChange struct {
	key, path string // as given, and resolved
	mode      os.FileMode
	setMode   bool
	uid, gid  int
}

// preparePerm validates perm for path. A mode of 0 leaves the mode alone
// unless def is given (as octal digits), which then applies.
func (s *Server) preparePerm(key string, perm wire.Permission, def int) (permChange, error) {
	p, err := s.resolve(key)
	if err != nil {
		return permChange{}, err
	}
	c := permChange{key: key, path: p}
	m := perm.Mode
	if m == 0 {
		m = def
	}
	if m != 0 {
		if c.mode, err = parseMode(m, sandbox.CodeInvalidRequest); err != nil {
			return permChange{}, err
		}
		c.setMode = true
	}
	if c.uid, c.gid, err = lookupIDs(perm.Owner, perm.Group, sandbox.CodeInvalidRequest); err != nil {
		return permChange{}, err
	}
	return c, nil
}

// apply changes owner and group first (a chown clears setuid bits), then
// the mode. Symbolic links are followed.
func (c permChange) apply() error {
	if c.uid >= 0 || c.gid >= 0 {
		if err := os.Chown(c.path, c.uid, c.gid); err != nil {
			return fileError("chown", c.path, err)
		}
	}
	if c.setMode {
		if err := os.Chmod(c.path, c.mode); err != nil {
			return fileError("chmod", c.path, err)
		}
	}
	return nil
}

// preparePerms validates a path → Permission map; the result is sorted by
// path.
func (s *Server) preparePerms(req map[string]wire.Permission, def int) ([]permChange, error) {
	if len(req) == 0 {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "request body must map at least one path to a permission")
	}
	out := make([]permChange, 0, len(req))
	for key, perm := range req {
		c, err := s.preparePerm(key, perm, def)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b permChange) int {
		if a.path != b.path {
			return cmp.Compare(a.path, b.path)
		}
		return cmp.Compare(a.key, b.key)
	})
	return out, nil
}

// handleChmod changes mode, owner and group of existing files. Mode 0 (or
// absent) leaves the mode unchanged, as OpenSandbox does; owner and group
// are names or numeric ids, "" leaves them unchanged.
func (s *Server) handleChmod(w http.ResponseWriter, r *http.Request) {
	var req map[string]wire.Permission
	if err := decodeJSON(w, r, s.cfg.MaxJSONBytes, &req, false); err != nil {
		writeError(w, err)
		return
	}
	changes, err := s.preparePerms(req, 0)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, c := range changes {
		if _, err := os.Stat(c.path); err != nil {
			writeError(w, fileError("chmod", c.path, err))
			return
		}
		if err := c.apply(); err != nil {
			writeError(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}
