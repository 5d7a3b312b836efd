package egress

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Response scrubbing. The proxy never puts a credential into a response,
// but an upstream may echo the request back (a debugging endpoint, a
// reverse proxy that reflects what it got, an error page quoting the
// request, a log viewer showing earlier requests): through the
// intercepted connection that would hand the box the value it must never
// see. So each response relayed on a connection whose requests can get
// credentials (relaysHTTP) loses, in its header values and in its body,
// every credential the box's proxy could have delivered: a secret's value
// becomes its placeholder (what the box sent); a binding's header value,
// and the token after its scheme ("Bearer <token>"), become withheldMark.
//
// A body of a known length up to scrubWholeMax is read whole, scrubbed and
// sent with its new length; a longer one, or one of unknown length, is
// scrubbed as it streams (a credential split across reads is still found)
// and goes to the box chunked, or delimited by the connection's end for an
// HTTP/1.0 request. The proxy asks such upstreams for uncompressed bodies
// (Accept-Encoding: identity); one that compresses anyway with gzip or
// deflate is decoded and scrubbed, any other content coding cannot be read
// and is refused with a 502 (bodyUnscrubbable). After a protocol upgrade
// (101, a WebSocket) the connection's bytes are copied as they are: only
// the 101's headers are scrubbed.

// withheldMark replaces a binding's credential in a response.
const withheldMark = "[credential withheld by AstraBox]"

// minScrubLen is the shortest value scrubbed: shorter ones would match
// ordinary text (and are no credential worth the name).
const minScrubLen = 8

// swap is one replacement: old, a credential, becomes new.
type swap struct{ old, new []byte }

// scrubber replaces the credentials of a box's secrets and bindings.
type scrubber struct {
	swaps  []swap
	maxOld int // the longest old
}

// newScrubber returns the scrubber for these secrets and bindings; it has
// nothing to do (empty) when none has a value of minScrubLen or more.
func newScrubber(secrets []Secret, bindings []Binding) *scrubber {
	s := &scrubber{}
	add := func(old, new string) {
		if len(old) < minScrubLen {
			return
		}
		s.swaps = append(s.swaps, swap{[]byte(old), []byte(new)})
		s.maxOld = max(s.maxOld, len(old))
	}
	for _, sec := range secrets {
		add(sec.Value, sec.Placeholder)
	}
	for _, b := range bindings {
		for _, bh := range b.Headers {
			add(bh.Value, withheldMark)
			if _, token, ok := strings.Cut(bh.Value, " "); ok {
				add(token, withheldMark)
			}
		}
	}
	return s
}

// empty reports a scrubber with nothing to replace.
func (s *scrubber) empty() bool { return len(s.swaps) == 0 }

// headers rewrites h's values as the comment at the top says; it returns
// how many values it changed.
func (s *scrubber) headers(h http.Header) int {
	n := 0
	for k, vs := range h {
		for i, v := range vs {
			if out, changed := s.replace([]byte(v)); changed > 0 {
				h[k][i] = string(out)
				n++
			}
		}
	}
	return n
}

// replace returns b with every credential replaced and how many were,
// scanning left to right (at one position the longest credential wins).
func (s *scrubber) replace(b []byte) ([]byte, int) {
	out, _, n := s.replaceUpTo(b, true)
	return out, n
}

// replaceUpTo is replace for a stream's bytes read so far: unless final,
// a credential may begin in the last maxOld-1 bytes and end in bytes not
// read yet, so only credentials that begin before those are replaced.
// out is b, replaced up to the point scanned, then the rest unchanged;
// tail is the length of that rest, to scan again with what follows.
func (s *scrubber) replaceUpTo(b []byte, final bool) (out []byte, tail, n int) {
	limit := len(b)
	if !final {
		limit = max(0, len(b)-(s.maxOld-1))
	}
	i := 0
	for {
		at, which := s.next(b, i)
		if at < 0 || at >= limit {
			break
		}
		out = append(out, b[i:at]...)
		out = append(out, s.swaps[which].new...)
		i = at + len(s.swaps[which].old)
		n++
	}
	scanned := max(i, limit)
	if n == 0 {
		return b, len(b) - scanned, 0
	}
	return append(out, b[i:]...), len(b) - scanned, n
}

// next returns where in b, at i or later, the first credential begins and
// which swap it is (the longest of those beginning there); -1 for none.
func (s *scrubber) next(b []byte, i int) (at, which int) {
	at, which = -1, -1
	for k, sw := range s.swaps {
		j := bytes.Index(b[i:], sw.old)
		if j < 0 {
			continue
		}
		if j += i; at < 0 || j < at || (j == at && len(sw.old) > len(s.swaps[which].old)) {
			at, which = j, k
		}
	}
	return at, which
}

// body returns r scrubbed as it is read; count, when not nil, is called
// with the number of credentials replaced once r is drained.
func (s *scrubber) body(r io.ReadCloser, count func(int)) io.ReadCloser {
	return &scrubReader{s: s, src: r, count: count}
}

// scrubReader is a response body scrubbed as it streams: it holds back the
// last maxOld-1 bytes read until more come or the source ends.
type scrubReader struct {
	s     *scrubber
	src   io.ReadCloser
	count func(int)
	buf   []byte // what is read into: held, then the new bytes
	held  []byte // read, not scanned yet (a credential may begin here)
	ready []byte // scanned and replaced, not returned yet (may be in buf)
	n     int
	err   error
}

func (r *scrubReader) Read(p []byte) (int, error) {
	for len(r.ready) == 0 {
		if r.err != nil {
			if r.count != nil {
				r.count(r.n)
				r.count = nil
			}
			return 0, r.err
		}
		// ready is empty: buf may be written again.
		if r.buf == nil {
			r.buf = make([]byte, r.s.maxOld+scrubChunk)
		}
		buf := r.buf[:copy(r.buf, r.held)]
		m, err := io.ReadAtLeast(r.src, r.buf[len(buf):], 1)
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		out, tail, n := r.s.replaceUpTo(r.buf[:len(buf)+m], err != nil)
		r.n += n
		r.ready = out[:len(out)-tail]
		r.held = append(r.held[:0], out[len(out)-tail:]...)
		r.err = err
	}
	k := copy(p, r.ready)
	r.ready = r.ready[k:]
	return k, nil
}

// scrubChunk is how much a scrubReader reads from its source at a time:
// each becomes a chunk of the response to the box, so a large one keeps
// the writes to it few.
const scrubChunk = 256 << 10

func (r *scrubReader) Close() error { return r.src.Close() }

// scrubWholeMax is the longest body read whole to be scrubbed (its
// Content-Length kept right); longer ones stream.
const scrubWholeMax = 1 << 20

// bodyUnscrubbable reports a response body the proxy cannot read to
// scrub it: a content coding it does not decode.
type bodyUnscrubbable struct{ coding string }

func (e bodyUnscrubbable) Error() string {
	return fmt.Sprintf("the response is encoded with %q, which AstraBox cannot scrub of credentials", e.coding)
}

// scrubResponse makes resp's headers and body free of s's credentials as
// the comment at the top says. report is called with the number of header
// values changed and, once the body is drained, of credentials replaced
// in it.
func (s *scrubber) scrubResponse(resp *http.Response, report func(headers, body int)) error {
	if n := s.headers(resp.Header); n > 0 {
		report(n, 0)
	}
	if !hasBody(resp) {
		return nil
	}
	body := resp.Body
	switch coding := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); coding {
	case "", "identity":
		if resp.ContentLength >= 0 && resp.ContentLength <= scrubWholeMax {
			data, err := io.ReadAll(resp.Body)
			if err != nil {
				return fmt.Errorf("read the response to scrub it: %w", err)
			}
			out, n := s.replace(data)
			if n > 0 {
				report(0, n)
			}
			resp.Header.Del("Content-Length")
			resp.ContentLength = int64(len(out))
			resp.Body = readCloser{bytes.NewReader(out), resp.Body}
			return nil
		}
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return fmt.Errorf("decode the gzip response to scrub it: %w", err)
		}
		body = readCloser{zr, resp.Body}
	case "deflate":
		zr, err := zlib.NewReader(resp.Body)
		if err != nil {
			return fmt.Errorf("decode the deflate response to scrub it: %w", err)
		}
		body = readCloser{zr, resp.Body}
	default:
		return bodyUnscrubbable{coding}
	}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = false
	if resp.Request != nil && !resp.Request.ProtoAtLeast(1, 1) {
		resp.TransferEncoding = nil
		resp.Close = true
	} else {
		resp.TransferEncoding = []string{"chunked"}
	}
	resp.Body = s.body(body, func(n int) {
		if n > 0 {
			report(0, n)
		}
	})
	return nil
}

// hasBody reports whether resp may carry a body (RFC 9110: none for
// HEAD, 1xx, 204 and 304).
func hasBody(resp *http.Response) bool {
	if resp.Request != nil && resp.Request.Method == http.MethodHead {
		return false
	}
	return resp.StatusCode >= 200 && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotModified
}

// readCloser reads from a decoder and closes the body under it.
type readCloser struct {
	io.Reader
	io.Closer
}
