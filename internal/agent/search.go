package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

const (
	maxSearchMatches = 200
	// maxMatchText bounds the text of one match.
	maxMatchText = 500
	// maxSearchLine bounds a line that is searched; a file with a longer
	// line is searched up to it.
	maxSearchLine = 1 << 20
)

type searchArgs struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
	Glob    string `json:"glob"`
}

type searchMatch struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

type searchResult struct {
	Matches   []searchMatch `json:"matches"`
	Truncated bool          `json:"truncated"`
}

// search finds the lines matching a Go regular expression in a file or
// below a directory (in lexical order), skipping .git directories,
// non-regular files and binary files. glob, when given, selects files by
// base name, or by their slash-separated path below the searched directory
// when it holds a '/'.
func (tb *toolbox) search(ctx context.Context, raw string) (any, error) {
	var a searchArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if a.Pattern == "" {
		return nil, errors.New("pattern is required")
	}
	re, err := regexp.Compile(a.Pattern)
	if err != nil {
		return nil, fmt.Errorf("pattern: %w", err)
	}
	if _, err := filepath.Match(a.Glob, ""); err != nil {
		return nil, fmt.Errorf("glob %q: %w", a.Glob, err)
	}
	root, err := tb.resolveOr(a.Path, ".")
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("search %s: %w", tb.display(root), err)
	}
	res := searchResult{Matches: []searchMatch{}}
	errFull := errors.New("enough matches")
	walkErr := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil // an unreadable entry below the root is skipped
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("%w: %w", errToolInterrupted, ctxErr)
		}
		if d.IsDir() {
			if d.Name() == ".git" && p != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !globMatch(a.Glob, root, p) {
			return nil
		}
		if full := tb.searchFile(re, p, &res); full {
			return errFull
		}
		return nil
	})
	if walkErr != nil && !errors.Is(walkErr, errFull) {
		if errors.Is(walkErr, errToolInterrupted) {
			return nil, walkErr
		}
		return nil, fmt.Errorf("search %s: %w", tb.display(root), walkErr)
	}
	return res, nil
}

// globMatch reports whether the file p below root passes the glob.
func globMatch(glob, root, p string) bool {
	if glob == "" {
		return true
	}
	name := filepath.Base(p)
	if strings.Contains(glob, "/") {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return false
		}
		name = filepath.ToSlash(rel)
	}
	ok, _ := filepath.Match(glob, name)
	return ok
}

// searchFile adds the matches of one file and reports whether the result
// is full. A file that cannot be read or is binary is skipped.
func (tb *toolbox) searchFile(re *regexp.Regexp, p string, res *searchResult) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	if head, _ := br.Peek(sniffBytes); isBinary(head) {
		return false
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), maxSearchLine)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if !re.Match(line) {
			continue
		}
		if len(res.Matches) == maxSearchMatches {
			res.Truncated = true
			return true
		}
		text := strings.ToValidUTF8(string(cutUTF8(line, maxMatchText)), "\uFFFD")
		res.Matches = append(res.Matches, searchMatch{Path: tb.display(p), Line: n, Text: text})
	}
	return false
}
