package egress

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/astrabox/astrabox/sandbox"
)

// fakeResolver answers from a map; each name may have a sequence of
// answers (the last repeats), as a rebinding server gives.
type fakeResolver struct {
	mu    sync.Mutex
	names map[string][][]netip.Addr
	calls map[string]int
}

func newResolver(m map[string][]string) *fakeResolver {
	r := &fakeResolver{names: map[string][][]netip.Addr{}, calls: map[string]int{}}
	for n, as := range m {
		r.set(n, as...)
	}
	return r
}

// set gives name one answer per argument, in turn; each argument is a
// comma-separated list.
func (r *fakeResolver) set(name string, answers ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var seq [][]netip.Addr
	for _, a := range answers {
		var addrs []netip.Addr
		for _, s := range splitComma(a) {
			addrs = append(addrs, netip.MustParseAddr(s))
		}
		seq = append(seq, addrs)
	}
	r.names[name] = seq
	r.calls[name] = 0
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

func (r *fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seq, ok := r.names[host]
	if !ok || len(seq) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(r.calls[host], len(seq)-1)
	r.calls[host]++
	return seq[i], nil
}

func testBox(t *testing.T, cfg Config, np sandbox.NetworkPolicy) *Box {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := NewManager(cfg)
	b := &Box{id: "box1", m: m, log: m.log}
	pol, err := Compile(np)
	if err != nil {
		t.Fatal(err)
	}
	b.pol.Store(&boxPolicy{spec: np, compiled: pol})
	return b
}

func query(t testing.TB, name string, typ dnsmessage.Type) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 77, RecursionDesired: true})
	_ = b.StartQuestions()
	_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET})
	out, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDNSAnswers(t *testing.T) {
	res := newResolver(map[string][]string{
		"allowed.test":  {"203.0.113.2,2001:db8::2,::ffff:203.0.113.3"},
		"private.test":  {"10.1.2.3"},
		"mixed.test":    {"127.0.0.1,203.0.113.4"},
		"denied.test":   {"203.0.113.5"},
		"metadata.test": {"169.254.169.254"},
	})
	np := sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, Rules: rules("allow", "*.test", "deny", "denied.test")}
	np.Rules = append(rules("deny", "denied.test"), np.Rules...)
	b := testBox(t, Config{Resolver: res}, np)
	tests := []struct {
		name  string
		typ   dnsmessage.Type
		rcode dnsmessage.RCode
		addrs []string
	}{
		{"allowed.test.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"203.0.113.2", "203.0.113.3"}},
		{"ALLOWED.test.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"203.0.113.2", "203.0.113.3"}},
		{"allowed.test.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, nil},
		{"allowed.test.", dnsmessage.TypeTXT, dnsmessage.RCodeSuccess, nil},
		{"private.test.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
		{"metadata.test.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
		{"mixed.test.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"203.0.113.4"}},
		{"denied.test.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
		{"missing.test.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
		{"example.com.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
	}
	for _, tt := range tests {
		resp := b.answer(context.Background(), query(t, tt.name, tt.typ))
		var msg dnsmessage.Message
		if err := msg.Unpack(resp); err != nil {
			t.Fatalf("%s: unpack: %v", tt.name, err)
		}
		if msg.ID != 77 || !msg.Response || msg.RCode != tt.rcode {
			t.Errorf("%s %v: id %d response %v rcode %v, want rcode %v", tt.name, tt.typ, msg.ID, msg.Response, msg.RCode, tt.rcode)
		}
		var got []string
		for _, a := range msg.Answers {
			got = append(got, netip.AddrFrom4(a.Body.(*dnsmessage.AResource).A).String())
		}
		if len(got) != len(tt.addrs) || (len(got) > 0 && got[0] != tt.addrs[0]) {
			t.Errorf("%s %v: answers %v, want %v", tt.name, tt.typ, got, tt.addrs)
		}
	}
	if names := b.namesFor(netip.MustParseAddr("203.0.113.2")); len(names) != 1 || names[0] != "allowed.test" {
		t.Errorf("namesFor = %v", names)
	}
	if b.answer(context.Background(), []byte{1, 2, 3}) != nil {
		t.Error("answered a truncated header")
	}
}

func FuzzDNSAnswer(f *testing.F) {
	f.Add(query(f, "allowed.test.", dnsmessage.TypeA))
	f.Add(query(f, "x.", dnsmessage.TypeAAAA))
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0})
	res := newResolver(map[string][]string{"allowed.test": {"203.0.113.2"}})
	m := NewManager(Config{Resolver: res, Logger: slog.New(slog.DiscardHandler)})
	b := &Box{id: "fuzz", m: m, log: m.log}
	pol, _ := Compile(sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, DefaultAction: "allow"})
	b.pol.Store(&boxPolicy{compiled: pol})
	f.Fuzz(func(t *testing.T, q []byte) {
		resp := b.answer(context.Background(), q)
		if resp == nil {
			return
		}
		var msg dnsmessage.Message
		if err := msg.Unpack(resp); err != nil {
			t.Fatalf("answer does not unpack: %v", err)
		}
		if !msg.Response {
			t.Fatal("answer is not a response")
		}
	})
}
