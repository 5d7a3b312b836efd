package execd

import (
	"encoding/json"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"syscall"

	"github.com/astrabox/astrabox/execd/wire"
)

// fileType is the FileInfo type of fi: file, directory, symlink or other.
func fileType(fi os.FileInfo) string {
	switch m := fi.Mode(); {
	case m&os.ModeSymlink != 0:
		return "symlink"
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "file"
	}
	return "other"
}

// nameCache resolves uids and gids to names (os/user, which reads
// /etc/passwd and /etc/group when built without cgo) and remembers them for
// one request. Ids without a name are reported as numbers.
type nameCache struct {
	users, groups map[uint32]string
}

func newNameCache() *nameCache {
	return &nameCache{users: map[uint32]string{}, groups: map[uint32]string{}}
}

func (c *nameCache) user(uid uint32) string {
	if n, ok := c.users[uid]; ok {
		return n
	}
	n := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(n); err == nil && u.Username != "" {
		n = u.Username
	}
	c.users[uid] = n
	return n
}

func (c *nameCache) group(gid uint32) string {
	if n, ok := c.groups[gid]; ok {
		return n
	}
	n := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(n); err == nil && g.Name != "" {
		n = g.Name
	}
	c.groups[gid] = n
	return n
}

// info describes fi (from Lstat) found at path. CreatedAt is the inode
// change time where the platform gives no birth time through stat.
func (c *nameCache) info(path string, fi os.FileInfo) wire.FileInfo {
	out := wire.FileInfo{
		Path:       path,
		Type:       fileType(fi),
		Size:       fi.Size(),
		ModifiedAt: fi.ModTime().UTC(),
		CreatedAt:  fi.ModTime().UTC(),
		Mode:       modeDigits(fi.Mode()),
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		out.Owner = c.user(st.Uid)
		out.Group = c.group(st.Gid)
		if t, ok := changeTime(st); ok {
			out.CreatedAt = t.UTC()
		}
	}
	return out
}

// handleFileInfo answers a map from each `path` as given to its FileInfo.
// Symbolic links are described themselves, not followed. Any missing path
// fails the request with FILE_NOT_FOUND.
func (s *Server) handleFileInfo(w http.ResponseWriter, r *http.Request) {
	given, paths, err := s.queryPaths(r, "path")
	if err != nil {
		writeError(w, err)
		return
	}
	cache := newNameCache()
	out := make(map[string]wire.FileInfo, len(paths))
	for i, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			writeError(w, fileError("stat", p, err))
			return
		}
		out[given[i]] = cache.info(p, fi)
	}
	writeJSON(w, http.StatusOK, out)
}

// jsonArray streams a JSON array as the body of a 200 answer, so that long
// listings need no memory for the whole answer.
type jsonArray struct {
	w   http.ResponseWriter
	enc *json.Encoder
	n   int
	err error
}

// startJSONArray sends the 200 status and the opening bracket.
func startJSONArray(w http.ResponseWriter) *jsonArray {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write([]byte{'['})
	return &jsonArray{w: w, enc: json.NewEncoder(w), err: err}
}

// add appends v; its error (the client went away) is sticky.
func (a *jsonArray) add(v any) error {
	if a.err != nil {
		return a.err
	}
	if a.n > 0 {
		if _, a.err = a.w.Write([]byte{','}); a.err != nil {
			return a.err
		}
	}
	a.n++
	a.err = a.enc.Encode(v)
	return a.err
}

// close sends the closing bracket.
func (a *jsonArray) close() {
	if a.err == nil {
		_, a.err = a.w.Write([]byte("]\n"))
	}
}
