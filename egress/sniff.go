package egress

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/astrabox/astrabox/egress/internal/syntax"
)

// What the proxy reads of a connection before deciding it: the first
// bytes the box sends, up to maxSniff, which name where it goes (a TLS
// ClientHello's server name, an HTTP request's Host). They are replayed to
// the upstream unchanged.

// maxSniff bounds what the proxy reads before it decides.
const maxSniff = 64 << 10

// errNeedMore says the bytes so far do not yet hold the whole header.
var errNeedMore = errors.New("need more bytes")

// errMalformed says the bytes are not a well-formed header of the protocol.
var errMalformed = errors.New("malformed")

// protocol is what the first bytes of a connection look like.
type protocol uint8

const (
	protoOther protocol = iota
	protoTLS
	protoHTTP
)

// classify guesses the protocol from the first bytes (at least one).
func classify(b []byte) protocol {
	if len(b) == 0 {
		return protoOther
	}
	if b[0] == 0x16 {
		return protoTLS
	}
	// An HTTP/1 request line starts with a method token and a space.
	for i := 0; i < len(b) && i < 16; i++ {
		c := b[i]
		if c == ' ' && i > 0 {
			return protoHTTP
		}
		if c < 'A' || c > 'Z' {
			return protoOther
		}
	}
	if len(b) < 16 {
		return protoHTTP // an upper-case prefix so far: read on
	}
	return protoOther
}

// clientHelloSNI returns the server name of the TLS ClientHello that b
// starts with ("" when it names none), errNeedMore while the hello is
// incomplete, or errMalformed. The hello may span several records.
func clientHelloSNI(b []byte) (string, error) {
	var hs []byte // handshake bytes gathered from the records
	for len(b) > 0 {
		if len(b) < 5 {
			return "", errNeedMore
		}
		if b[0] != 0x16 || b[1] != 3 {
			return "", errMalformed
		}
		n := int(b[3])<<8 | int(b[4])
		if n == 0 || n > 1<<14 {
			return "", errMalformed
		}
		if len(b) < 5+n {
			return "", errNeedMore
		}
		hs = append(hs, b[5:5+n]...)
		b = b[5+n:]
		if len(hs) >= 4 {
			if hs[0] != 1 { // client_hello
				return "", errMalformed
			}
			mlen := int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3])
			if mlen > maxSniff {
				return "", errMalformed
			}
			if len(hs) >= 4+mlen {
				return helloSNI(hs[4 : 4+mlen])
			}
		}
	}
	return "", errNeedMore
}

// helloSNI reads the server_name extension of a ClientHello body.
func helloSNI(m []byte) (string, error) {
	r := reader(m)
	if !r.skip(2+32) || !r.skipVec(1) || !r.skipVec(2) || !r.skipVec(1) {
		return "", errMalformed
	}
	if len(r) == 0 {
		return "", nil // no extensions
	}
	exts, ok := r.vec(2)
	if !ok {
		return "", errMalformed
	}
	for len(exts) > 0 {
		typ, ok1 := exts.u16()
		data, ok2 := exts.vec(2)
		if !ok1 || !ok2 {
			return "", errMalformed
		}
		if typ != 0 {
			continue
		}
		list, ok := data.vec(2)
		if !ok {
			return "", errMalformed
		}
		for len(list) > 0 {
			nt, ok1 := list.u8()
			name, ok2 := list.vec(2)
			if !ok1 || !ok2 {
				return "", errMalformed
			}
			if nt == 0 {
				s := string(name)
				if _, ok := syntax.HostName(s); !ok {
					return "", errMalformed
				}
				return s, nil
			}
		}
		return "", nil
	}
	return "", nil
}

// reader reads big-endian fields off a byte slice.
type reader []byte

func (r *reader) skip(n int) bool {
	if len(*r) < n {
		return false
	}
	*r = (*r)[n:]
	return true
}

func (r *reader) u8() (byte, bool) {
	if len(*r) < 1 {
		return 0, false
	}
	v := (*r)[0]
	*r = (*r)[1:]
	return v, true
}

func (r *reader) u16() (uint16, bool) {
	if len(*r) < 2 {
		return 0, false
	}
	v := uint16((*r)[0])<<8 | uint16((*r)[1])
	*r = (*r)[2:]
	return v, true
}

// vec reads a vector with a length prefix of lenBytes (1 or 2) bytes.
func (r *reader) vec(lenBytes int) (reader, bool) {
	var n int
	switch lenBytes {
	case 1:
		v, ok := r.u8()
		if !ok {
			return nil, false
		}
		n = int(v)
	default:
		v, ok := r.u16()
		if !ok {
			return nil, false
		}
		n = int(v)
	}
	if len(*r) < n {
		return nil, false
	}
	v := (*r)[:n]
	*r = (*r)[n:]
	return v, true
}

func (r *reader) skipVec(lenBytes int) bool { _, ok := r.vec(lenBytes); return ok }

// httpHead is the head of an HTTP/1 request the box sent.
type httpHead struct {
	req *http.Request
	n   int // bytes of the head, blank line included
}

// readHTTPHead parses the request head that b starts with, errNeedMore
// while its blank line has not come, or errMalformed.
func readHTTPHead(b []byte) (httpHead, error) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) >= maxSniff {
			return httpHead{}, errMalformed
		}
		return httpHead{}, errNeedMore
	}
	n := end + 4
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b[:n])))
	if err != nil {
		return httpHead{}, errMalformed
	}
	return httpHead{req: req, n: n}, nil
}

// hostName splits an HTTP Host (or a ClientHello's name) into a
// normalized name, or an IP literal. ok is false for anything else.
func hostName(host string) (name string, ip netip.Addr, ok bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if a, err := netip.ParseAddr(host); err == nil {
		return "", a.Unmap().WithZone(""), true
	}
	name, ok = syntax.HostName(host)
	return name, netip.Addr{}, ok
}
