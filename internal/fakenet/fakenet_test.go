package fakenet

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/astrabox/astrabox/internal/testenv"
)

// query encodes an IN query of name and type.
func query(t *testing.T, name string, typ dnsmessage.Type, class dnsmessage.Class) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		t.Fatal(err)
	}
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: class}); err != nil {
		t.Fatal(err)
	}
	out, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAnswer(t *testing.T) {
	s := &Server{names: map[string]netip.Addr{"up.test": netip.MustParseAddr("203.0.113.2")}}
	cases := []struct {
		name    string
		query   []byte
		rcode   dnsmessage.RCode
		answers []string // A records
	}{
		{"a known name", query(t, "up.test.", dnsmessage.TypeA, dnsmessage.ClassINET), dnsmessage.RCodeSuccess, []string{"203.0.113.2"}},
		{"case does not matter", query(t, "UP.Test.", dnsmessage.TypeA, dnsmessage.ClassINET), dnsmessage.RCodeSuccess, []string{"203.0.113.2"}},
		{"another type of a known name", query(t, "up.test.", dnsmessage.TypeAAAA, dnsmessage.ClassINET), dnsmessage.RCodeSuccess, nil},
		{"an unknown name", query(t, "other.test.", dnsmessage.TypeA, dnsmessage.ClassINET), dnsmessage.RCodeNameError, nil},
		{"another class", query(t, "up.test.", dnsmessage.TypeA, dnsmessage.ClassCHAOS), dnsmessage.RCodeRefused, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var p dnsmessage.Parser
			h, err := p.Start(s.answer(tc.query))
			if err != nil {
				t.Fatal(err)
			}
			if !h.Response || h.ID != 7 || h.RCode != tc.rcode {
				t.Fatalf("header %+v, want a response to id 7 with rcode %v", h, tc.rcode)
			}
			if err := p.SkipAllQuestions(); err != nil {
				t.Fatal(err)
			}
			rrs, err := p.AllAnswers()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, rr := range rrs {
				if a, ok := rr.Body.(*dnsmessage.AResource); ok {
					got = append(got, netip.AddrFrom4(a.A).String())
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.answers) {
				t.Fatalf("answers %v, want %v", got, tc.answers)
			}
		})
	}
	if s.answer([]byte{1, 2, 3}) != nil {
		t.Error("an answer to a message that is not DNS")
	}
}

// TestStart starts a stand-in and reaches its HTTP, HTTPS and name
// servers from the host, then checks that Close removes its namespace
// and link.
func TestStart(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedCommand(t, "ip")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "ok %s tls=%v", r.Host, r.TLS != nil)
	})
	s, err := Start(Config{Prefix: "fakenettest", Handler: h, Names: []string{"up.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !netip.MustParsePrefix("203.0.113.0/24").Contains(s.Addr) {
		t.Fatalf("address %s is not in TEST-NET-3", s.Addr)
	}
	// HTTPS to a name, dialled at the server's address.
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp4", netip.AddrPortFrom(s.Addr, 443).String())
	}
	plain := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	secure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DialContext: dial, TLSClientConfig: &tls.Config{RootCAs: s.Roots}}}
	for _, tc := range []struct {
		c         *http.Client
		url, want string
	}{
		{plain, "http://" + s.Addr.String() + "/", "ok " + s.Addr.String() + " tls=false"},
		{secure, "https://up.test/", "ok up.test tls=true"},
		{secure, "https://up.test/", "ok up.test tls=true"}, // a cached certificate
	} {
		resp, err := tc.c.Get(tc.url)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != tc.want {
			t.Errorf("GET %s: %q, want %q", tc.url, body, tc.want)
		}
	}
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp4", netip.AddrPortFrom(s.Addr, 53).String())
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip4", "up.test")
	if err != nil || len(addrs) != 1 || addrs[0] != s.Addr {
		t.Errorf("lookup on the name server: %v %v", addrs, err)
	}
	if got, err := s.LookupNetIP(ctx, "ip4", "UP.test."); err != nil || len(got) != 1 || got[0] != s.Addr {
		t.Errorf("LookupNetIP: %v %v", got, err)
	}
	if _, err := s.LookupNetIP(ctx, "ip4", "other.test"); err == nil {
		t.Error("LookupNetIP of an unknown name succeeded")
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), s.ns) {
		t.Errorf("namespace %s is left: %s", s.ns, out)
	}
	if _, err := net.InterfaceByName(s.hostIf); err == nil {
		t.Errorf("link %s is left", s.hostIf)
	}
	if has, _ := hostHas(s.HostAddr); has {
		t.Errorf("the host still has %s", s.HostAddr)
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
