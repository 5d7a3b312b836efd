package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

const (
	maxReadLines = 2000
	maxReadBytes = 64 << 10
	// maxEditBytes bounds the file edit_file loads.
	maxEditBytes = 64 << 20
	maxDirItems  = 1000
	// sniffBytes is how much of a file decides whether it is binary.
	sniffBytes = 8 << 10
)

type readArgs struct {
	Path   string  `json:"path"`
	Offset flexInt `json:"offset"`
	Limit  flexInt `json:"limit"`
}

type readResult struct {
	Content    string `json:"content"`
	TotalLines int    `json:"total_lines"`
	Truncated  bool   `json:"truncated"`
}

// readFile returns the lines of a text file from line offset (1-based) on,
// at most limit (≤ maxReadLines) of them and maxReadBytes in all (a line
// that does not fit is cut). Truncated is true when the file holds more
// than was returned past the window's start.
func (tb *toolbox) readFile(raw string) (any, error) {
	var a readArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	p, err := tb.resolve(a.Path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", tb.display(p), err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory (use list_dir)", tb.display(p))
	}
	first := max(int(a.Offset), 1)
	limit := int(a.Limit)
	if limit <= 0 || limit > maxReadLines {
		limit = maxReadLines
	}
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(sniffBytes); isBinary(head) {
		return nil, fmt.Errorf("%s is a binary file; inspect it with shell tools (od, file)", tb.display(p))
	}

	var (
		content strings.Builder
		res     readResult
		full    bool
		line    = 1     // number of the line the next fragment belongs to
		open    = false // the current line has bytes
	)
	for {
		frag, err := br.ReadSlice('\n')
		if n := len(frag); n > 0 {
			open = true
			switch {
			case line >= first+limit || line >= first && full:
				res.Truncated = true
			case line >= first:
				room := maxReadBytes - content.Len()
				if n > room {
					content.Write(cutUTF8(frag, room))
					full, res.Truncated = true, true
				} else {
					content.Write(frag)
				}
			}
			if frag[n-1] == '\n' {
				line, open = line+1, false
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", tb.display(p), err)
		}
	}
	res.TotalLines = line - 1
	if open {
		res.TotalLines++
	}
	res.Content = strings.ToValidUTF8(content.String(), "\uFFFD")
	return res, nil
}

type writeArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// writeFile creates or replaces a file, creating missing parents. An
// existing file keeps its mode.
func (tb *toolbox) writeFile(raw string) (any, error) {
	var a writeArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	p, err := tb.resolve(a.Path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("create parent of %s: %w", tb.display(p), err)
	}
	if err := os.WriteFile(p, []byte(a.Content), 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", tb.display(p), err)
	}
	return map[string]int{"bytes_written": len(a.Content)}, nil
}

type editArgs struct {
	Path       string   `json:"path"`
	OldString  string   `json:"old_string"`
	NewString  string   `json:"new_string"`
	ReplaceAll flexBool `json:"replace_all"`
}

// editFile replaces old_string by new_string: it must occur exactly once
// unless replace_all.
func (tb *toolbox) editFile(raw string) (any, error) {
	var a editArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	p, err := tb.resolve(a.Path)
	if err != nil {
		return nil, err
	}
	if a.OldString == "" {
		return nil, errors.New("old_string is empty; use write_file to create or replace a whole file")
	}
	if a.OldString == a.NewString {
		return nil, errors.New("old_string and new_string are the same")
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("edit %s: %w", tb.display(p), err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory", tb.display(p))
	}
	if fi.Size() > maxEditBytes {
		return nil, fmt.Errorf("%s is too large to edit (%d bytes; the limit is %d)", tb.display(p), fi.Size(), maxEditBytes)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("edit %s: %w", tb.display(p), err)
	}
	text := string(b)
	n := strings.Count(text, a.OldString)
	switch {
	case n == 0:
		return nil, fmt.Errorf("old_string was not found in %s", tb.display(p))
	case n > 1 && !bool(a.ReplaceAll):
		return nil, fmt.Errorf("old_string occurs %d times in %s; add surrounding text to make it unique, or set replace_all", n, tb.display(p))
	case !bool(a.ReplaceAll):
		text = strings.Replace(text, a.OldString, a.NewString, 1)
	default:
		text = strings.ReplaceAll(text, a.OldString, a.NewString)
	}
	if err := os.WriteFile(p, []byte(text), fi.Mode().Perm()); err != nil {
		return nil, fmt.Errorf("edit %s: %w", tb.display(p), err)
	}
	return map[string]int{"replacements": n}, nil
}

type listArgs struct {
	Path string `json:"path"`
}

type dirEntry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size"`
}

type listResult struct {
	Entries   []dirEntry `json:"entries"`
	Truncated bool       `json:"truncated"`
}

// listDir lists at most maxDirItems entries of a directory, sorted by
// name; type is file, dir, symlink or other.
func (tb *toolbox) listDir(raw string) (any, error) {
	var a listArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	p, err := tb.resolveOr(a.Path, ".")
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", tb.display(p), err)
	}
	res := listResult{Entries: []dirEntry{}}
	for i, e := range ents {
		if i == maxDirItems {
			res.Truncated = true
			break
		}
		d := dirEntry{Name: e.Name(), Type: entryType(e.Type())}
		if info, err := e.Info(); err == nil && d.Type != "dir" {
			d.Size = info.Size()
		}
		res.Entries = append(res.Entries, d)
	}
	return res, nil
}

func entryType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsRegular():
		return "file"
	default:
		return "other"
	}
}
