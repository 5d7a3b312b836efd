package fakenet

import (
	"errors"
	"net"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// serveDNS answers queries on pc from s.names until pc is closed.
func (s *Server) serveDNS(pc net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if resp := s.answer(buf[:n]); resp != nil {
			_, _ = pc.WriteTo(resp, from)
		}
	}
}

// answer builds the response to one query: the A record of a name in
// s.names, no answer for another type of a known name, NXDOMAIN for an
// unknown name; nil when query is not a DNS query (nothing is sent).
func (s *Server) answer(query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	resp := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	q, err := p.Question()
	if err != nil {
		resp.RCode = dnsmessage.RCodeFormatError
		return build(resp, nil, nil)
	}
	a, ok := s.names[strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))]
	switch {
	case q.Class != dnsmessage.ClassINET:
		resp.RCode = dnsmessage.RCodeRefused
	case !ok:
		resp.RCode = dnsmessage.RCodeNameError
	case q.Type == dnsmessage.TypeA && a.Is4():
		return build(resp, &q, &dnsmessage.AResource{A: a.As4()})
	}
	return build(resp, &q, nil)
}

// build encodes a response with question q (nil: none) and answer a (nil:
// none); nil on an encoding error.
func build(h dnsmessage.Header, q *dnsmessage.Question, a *dnsmessage.AResource) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), h)
	b.EnableCompression()
	if q != nil {
		if b.StartQuestions() != nil || b.Question(*q) != nil {
			return nil
		}
		if a != nil {
			rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 30}
			if b.StartAnswers() != nil || b.AResource(rh, *a) != nil {
				return nil
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
