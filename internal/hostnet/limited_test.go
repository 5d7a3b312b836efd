package hostnet

import (
	"slices"
	"strings"
	"testing"
)

func TestLimitedRules(t *testing.T) {
	tests := []struct {
		name      string
		r         LimitedRules
		jumps     []string // table chain rule...
		nat, filt string   // the restore scripts
	}{
		{
			name: "every interface of a prefix, from FORWARD",
			r:    LimitedRules{Iface: "abl+", NAT: "N", In: "I", Fwd: "F", Forward: "FORWARD", ProxyPort: 15001, DNSPort: 15053},
			jumps: []string{
				"filter INPUT -i abl+ -j I", "filter FORWARD -i abl+ -j F",
				"filter FORWARD -o abl+ -j F", "nat PREROUTING -i abl+ -j N",
			},
			nat: "*nat\n:N - [0:0]\n" +
				"-A N -p udp --dport 53 -j REDIRECT --to-ports 15053\n" +
				"-A N -p tcp --dport 53 -j REDIRECT --to-ports 15053\n" +
				"-A N -p tcp -j REDIRECT --to-ports 15001\nCOMMIT\n",
			filt: "*filter\n:F - [0:0]\n:I - [0:0]\n" +
				"-A F -j REJECT --reject-with icmp-admin-prohibited\n" +
				"-A I -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n" +
				"-A I -p tcp --dport 15001 -m conntrack --ctstate DNAT -j ACCEPT\n" +
				"-A I -p tcp --dport 15053 -m conntrack --ctstate DNAT -j ACCEPT\n" +
				"-A I -p udp --dport 15053 -m conntrack --ctstate DNAT -j ACCEPT\n" +
				"-A I -j REJECT --reject-with icmp-admin-prohibited\nCOMMIT\n",
		},
		{
			name: "one bridge, from DOCKER-USER, other ports",
			r:    LimitedRules{Iface: "sbxl0a1b", NAT: "N2", In: "I2", Fwd: "F2", Forward: "DOCKER-USER", ProxyPort: 1001, DNSPort: 1053},
			jumps: []string{
				"filter INPUT -i sbxl0a1b -j I2", "filter DOCKER-USER -i sbxl0a1b -j F2",
				"filter DOCKER-USER -o sbxl0a1b -j F2", "nat PREROUTING -i sbxl0a1b -j N2",
			},
			nat: "*nat\n:N2 - [0:0]\n" +
				"-A N2 -p udp --dport 53 -j REDIRECT --to-ports 1053\n" +
				"-A N2 -p tcp --dport 53 -j REDIRECT --to-ports 1053\n" +
				"-A N2 -p tcp -j REDIRECT --to-ports 1001\nCOMMIT\n",
			filt: "*filter\n:F2 - [0:0]\n:I2 - [0:0]\n" +
				"-A F2 -j REJECT --reject-with icmp-admin-prohibited\n" +
				"-A I2 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n" +
				"-A I2 -p tcp --dport 1001 -m conntrack --ctstate DNAT -j ACCEPT\n" +
				"-A I2 -p tcp --dport 1053 -m conntrack --ctstate DNAT -j ACCEPT\n" +
				"-A I2 -p udp --dport 1053 -m conntrack --ctstate DNAT -j ACCEPT\n" +
				"-A I2 -j REJECT --reject-with icmp-admin-prohibited\nCOMMIT\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var jumps []string
			for _, j := range tc.r.Jumps() {
				jumps = append(jumps, strings.Join(j, " "))
			}
			if !slices.Equal(jumps, tc.jumps) {
				t.Errorf("jumps\n%q\nwant\n%q", jumps, tc.jumps)
			}
			ch := tc.r.chains()
			if got := RestoreScript("nat", ch["nat"]); got != tc.nat {
				t.Errorf("nat\n%s\nwant\n%s", got, tc.nat)
			}
			if got := RestoreScript("filter", ch["filter"]); got != tc.filt {
				t.Errorf("filter\n%s\nwant\n%s", got, tc.filt)
			}
		})
	}
}
