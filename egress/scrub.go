package egress

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
// Each credential is also found in the encodings an echo commonly uses,
// and becomes its replacement in the same encoding (a secret's base64
// becomes its placeholder's base64): JSON string escaping (with '/' as
// "\/" or not), standard and URL-safe base64 (padded or not), hex (lower
// or upper case), and percent-encoding (every byte outside RFC 3986's
// unreserved set in upper or lower case hex, and as url.QueryEscape,
// url.PathEscape and JavaScript's encodeURIComponent write it). Inside a
// longer base64 text (a Basic credential, an encoded copy of the whole
// request) a credential is encoded one of three ways by its offset; the
// whole 4-character groups that encode only credential bytes are found
// and become withheldMark (the group at either end that it shares with
// the bytes around it stays: each carries at most two bytes of it). A
// credential of a secret without a placeholder (ScrubReader) becomes
// withheldMark in the same way. Not covered: a
// credential shorter than minScrubLen, a part of one, an encoding not
// listed (mixed-case hex, base64 broken into lines, encodings of
// encodings, UTF-16, HTML entities, a compressed or encrypted payload
// inside the body), and the password inside a Basic credential's decoded
// "user:password" unless it is a credential of its own.
//
// A body of a known length up to scrubWholeMax is read whole, scrubbed and
// sent with its new length; a longer one, or one of unknown length, is
// scrubbed as it streams (a credential split across reads is still found;
// bytes are held back only while they may begin one) and goes to the box
// chunked, or delimited by the connection's end for an HTTP/1.0 request.
// The proxy asks such upstreams for uncompressed bodies
// (Accept-Encoding: identity); one that compresses anyway with gzip or
// deflate is decoded and scrubbed, any other content coding cannot be read
// and is refused with a 502 (bodyUnscrubbable).
//
// An upgraded connection (101: a WebSocket, h2c) cannot be scrubbed: its
// frames carry their own lengths and may be compressed (WebSocket's
// permessage-deflate), so a replacement would corrupt them and a
// compressed echo would pass. The proxy therefore refuses protocol
// upgrades on every connection to a destination where the box's
// credentials go (deliversTo), whether or not the upgrade request itself
// would carry one (the upstream may replay a credential it got on an
// earlier request): the box gets a 403 that says so, and the upstream
// never sees the request. An upstream there that switches protocols
// unasked gets its connection closed and the box a 502. Elsewhere
// upgrades pass, spliced as they are (only the 101's headers are
// scrubbed). So WebSocket APIs that need a delivered credential (realtime
// APIs authenticated by header) do not work through protected delivery.

// withheldMark replaces a binding's credential in a response, and a
// credential found inside a longer base64 text.
const withheldMark = "[credential withheld by AstraBox]"

// minScrubLen is the shortest value scrubbed: shorter ones would match
// ordinary text (and are no credential worth the name). Every old a
// scrubber searches for (an encoding of such a value) is at least as
// long, and at least 2*scrubBlock-1.
const minScrubLen = 8

// swap is one replacement: old, a credential or an encoding of one,
// becomes new.
type swap struct{ old, new []byte }

// scrubber replaces the credentials of a box's secrets and bindings, and
// their encodings.
//
// It finds them in one pass over the bytes, however many there are:
// every swap's old is at least 2*scrubBlock-1 bytes long, so each of its
// occurrences holds a whole block of scrubBlock bytes that begins at a
// multiple of scrubBlock, within its first scrubBlock bytes. The scrubber
// indexes the blocks at those first offsets of every old (blocks; filter,
// a bitmap of their hashes, answers most lookups) and reads only aligned
// blocks, checking the olds of a block it knows in full.
type scrubber struct {
	swaps  []swap             // distinct olds, each of minScrubLen bytes or more
	blocks map[uint32][]block // a block of scrubBlock bytes -> where it begins an old's first bytes
	filter *[1 << 10]uint64   // 2^16 bits: those blocks' hashes
	maxOld int                // the longest old
}

// scrubBlock is the size of the blocks a scrubber reads.
const scrubBlock = 4

// block is where a block begins in an old: at off (below scrubBlock) in
// swap's old.
type block struct{ swap, off int }

// blockHash is x's bit in a scrubber's filter.
func blockHash(x uint32) uint32 { return (x * 0x9E3779B1) >> 16 }

// scrubEncodings are the encodings of a credential scrubbed besides the
// embedded base64 groups (see the comment at the top).
var scrubEncodings = []func(string) string{
	func(v string) string { return v },
	func(v string) string { return jsonString(v, true) },
	func(v string) string { return jsonString(v, false) },
	func(v string) string { return strings.ReplaceAll(jsonString(v, true), "/", `\/`) },
	func(v string) string { return base64.StdEncoding.EncodeToString([]byte(v)) },
	func(v string) string { return base64.RawStdEncoding.EncodeToString([]byte(v)) },
	func(v string) string { return base64.URLEncoding.EncodeToString([]byte(v)) },
	func(v string) string { return base64.RawURLEncoding.EncodeToString([]byte(v)) },
	func(v string) string { return hex.EncodeToString([]byte(v)) },
	func(v string) string { return strings.ToUpper(hex.EncodeToString([]byte(v))) },
	func(v string) string { return percentEncode(v, upperHex, "") },
	func(v string) string { return percentEncode(v, lowerHex, "") },
	func(v string) string { return percentEncode(v, upperHex, "!'()*") }, // encodeURIComponent
	url.QueryEscape,
	url.PathEscape,
}

const (
	upperHex = "0123456789ABCDEF"
	lowerHex = "0123456789abcdef"
)

// percentEncode writes each byte of v outside RFC 3986's unreserved set,
// and outside keep, as %XX with digits.
func percentEncode(v, digits, keep string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 || strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(digits[c>>4])
		b.WriteByte(digits[c&15])
	}
	return b.String()
}

// jsonString is v as encoding/json writes it inside a JSON string (without
// the quotes), with <, > and & escaped or not.
func jsonString(v string, escapeHTML bool) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(escapeHTML)
	if err := e.Encode(v); err != nil {
		return v
	}
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	return string(out[1 : len(out)-1])
}

// newScrubber returns the scrubber for these secrets and bindings; it has
// nothing to do (empty) when none has a value of minScrubLen or more. A
// secret without a placeholder is replaced by withheldMark.
func newScrubber(secrets []Secret, bindings []Binding) *scrubber {
	s := &scrubber{}
	seen := map[string]bool{}
	add := func(old, new string) {
		if len(old) < minScrubLen || seen[old] {
			return
		}
		seen[old] = true
		s.swaps = append(s.swaps, swap{[]byte(old), []byte(new)})
		s.maxOld = max(s.maxOld, len(old))
	}
	// addEncoded adds cred and its encodings. Where two encode alike (a
	// value without bytes to escape), the first added keeps its
	// replacement: the standalone encodings before the embedded groups.
	addEncoded := func(cred, repl string) {
		if len(cred) < minScrubLen {
			return
		}
		for _, enc := range scrubEncodings {
			add(enc(cred), enc(repl))
		}
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			for skip := range 3 {
				whole := (len(cred) - skip) / 3 * 3
				add(enc.EncodeToString([]byte(cred[skip:skip+whole])), withheldMark)
			}
		}
	}
	for _, sec := range secrets {
		repl := sec.Placeholder
		if repl == "" {
			repl = withheldMark
		}
		addEncoded(sec.Value, repl)
	}
	for _, b := range bindings {
		for _, bh := range b.Headers {
			if _, token, ok := strings.Cut(bh.Value, " "); ok {
				add(bh.Value, withheldMark) // its encodings hold the token's
				addEncoded(token, withheldMark)
			} else {
				addEncoded(bh.Value, withheldMark)
			}
		}
	}
	s.blocks, s.filter = map[uint32][]block{}, new([1 << 10]uint64)
	for i, sw := range s.swaps {
		for off := range scrubBlock {
			x := binary.LittleEndian.Uint32(sw.old[off:])
			s.blocks[x] = append(s.blocks[x], block{i, off})
			h := blockHash(x)
			s.filter[h>>6] |= 1 << (h & 63)
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

// replaceUpTo is replace for a stream's bytes read so far. Unless final, a
// credential may begin in b and end in bytes not read yet: b is replaced
// only up to the first position where what follows may begin one
// (holdFrom), so that the result is the same however the stream is cut
// into reads. out is b, replaced up to the point scanned, then the rest
// unchanged; tail is the length of that rest, to scan again with what
// follows.
func (s *scrubber) replaceUpTo(b []byte, final bool) (out []byte, tail, n int) {
	hold := len(b)
	if !final {
		hold = s.holdFrom(b, 0)
	}
	i := 0
	for {
		at, w := s.next(b, i, hold)
		if at >= hold {
			break
		}
		out = append(out, b[i:at]...)
		out = append(out, s.swaps[w].new...)
		i = at + len(s.swaps[w].old)
		n++
		if i > hold {
			hold = s.holdFrom(b, i)
		}
	}
	scanned := max(i, hold)
	if n == 0 {
		return b, len(b) - scanned, 0
	}
	return append(out, b[i:]...), len(b) - scanned, n
}

// holdFrom returns the first position, from on, where b's remaining bytes
// are the start of a credential longer than they are (len(b) if none):
// what a stream must hold back until more of it comes.
func (s *scrubber) holdFrom(b []byte, from int) int {
	h := len(b)
	for _, sw := range s.swaps {
		for j := max(from, len(b)-len(sw.old)+1); j < h; j++ {
			k := bytes.IndexByte(b[j:h], sw.old[0])
			if k < 0 {
				break
			}
			if j += k; bytes.HasPrefix(sw.old, b[j:]) {
				h = j
				break
			}
		}
	}
	return h
}

// next returns where in b, at i or later, the first credential begins
// and which swap it is (the longest of those beginning there); at is
// len(b) when none begins before end (one beginning at end or a little
// later may be returned).
func (s *scrubber) next(b []byte, i, end int) (at, which int) {
	at = len(b)
	// An old that begins at p holds the block at p rounded up to a
	// multiple of scrubBlock, at its offset below scrubBlock.
	last := min(len(b)-scrubBlock, end+scrubBlock-2) // the last block to read
	for q := (i + scrubBlock - 1) / scrubBlock * scrubBlock; q <= last; q += scrubBlock {
		x := binary.LittleEndian.Uint32(b[q:])
		if h := blockHash(x); s.filter[h>>6]&(1<<(h&63)) == 0 {
			continue
		}
		for _, bl := range s.blocks[x] {
			p, old := q-bl.off, s.swaps[bl.swap].old
			if p < i || p+len(old) > len(b) || p > at || p == at && len(old) <= len(s.swaps[which].old) {
				continue
			}
			if bytes.Equal(b[p:p+len(old)], old) {
				at, which = p, bl.swap
			}
		}
		if at < len(b) {
			// Those found at later blocks begin after q.
			return at, which
		}
	}
	return at, which
}

// ScrubReader returns r's bytes with the values of secrets scrubbed as
// the proxy scrubs the responses of a box's upstreams (see the comment at
// the top): each Value of minScrubLen bytes or more, and each encoding of
// it listed there, becomes the secret's Placeholder in the same encoding
// (withheldMark for a secret without one); the other fields do not count.
// Bytes are held back only while they may begin a value, so a stream
// (server-sent events) reaches the reader as it comes; the rest comes at
// the end of r. r is read as it is: a compressed body must be decoded
// first. Closing the result closes r when r is an io.Closer.
func ScrubReader(r io.Reader, secrets []Secret) io.ReadCloser {
	rc, ok := r.(io.ReadCloser)
	if !ok {
		rc = io.NopCloser(r)
	}
	s := newScrubber(secrets, nil)
	if s.empty() {
		return rc
	}
	return s.body(rc, nil)
}

// body returns r scrubbed as it is read; count, when not nil, is called
// with the number of credentials replaced once r is drained.
func (s *scrubber) body(r io.ReadCloser, count func(int)) io.ReadCloser {
	return &scrubReader{s: s, src: r, count: count}
}

// scrubReader is a response body scrubbed as it streams: it holds back the
// bytes read that may begin a credential (at most maxOld-1) until more
// come or the source ends, and returns the rest as soon as it is read.
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
