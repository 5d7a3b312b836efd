package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// egressClientPy is the in-box client of the egress bench, run with the
// box's python3, which times everything itself (time.perf_counter_ns), so
// that the figures are the network path's and not the exec's:
//
//	python3 egress.py MODE SCHEME ADDR NAME COUNT [CAFILE [AUTH]]
//
// It always dials ADDR (port 80 or 443 by SCHEME) and names NAME, in the
// Host header and for HTTPS in SNI and the certificate check (against
// CAFILE): the box needs no lookup, so DNS is measured only where asked.
// With AUTH, every request carries it as its Authorization header (a
// secret's placeholder, which the proxy replaces).
// MODE is one of
//
//   - fresh: COUNT GETs of /small, each on a new connection (connect, TLS
//     handshake, request, whole response; the close is not timed);
//   - keepalive: COUNT GETs of /small on one connection, after one that
//     opened it (not timed);
//   - download: one GET of /bytes/COUNT, from the request to the last byte;
//   - dns: COUNT A queries for NAME over UDP to ADDR port 53, after one
//     not timed.
//
// Each mode but download runs one warm-up first. It prints one line, MODE
// and the nanoseconds of each sample (download: the bytes read, then the
// nanoseconds), or an error on stderr with exit code 2.
const egressClientPy = `import http.client, os, socket, ssl, struct, sys, time

mode, scheme, addr, name, count = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
cafile = sys.argv[6] if len(sys.argv) > 6 else None
headers = {"Authorization": sys.argv[7]} if len(sys.argv) > 7 else {}
port = 443 if scheme == "https" else 80
tls = ssl.create_default_context(cafile=cafile) if scheme == "https" else None
now = time.perf_counter_ns

def fail(msg):
    print("error:", msg, file=sys.stderr)
    sys.exit(2)

def dial():
    s = socket.create_connection((addr, port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return tls.wrap_socket(s, server_hostname=name) if tls else s

class Plain(http.client.HTTPConnection):
    def connect(self):
        self.sock = dial()

class Secure(http.client.HTTPSConnection):
    def connect(self):
        self.sock = dial()

def conn():
    # Given the context, HTTPSConnection does not make one (loading the
    # system's roots) per connection.
    return Secure(name, port, timeout=30, context=tls) if tls else Plain(name, port, timeout=30)

def get(c, path):
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    body = r.read()
    if r.status != 200:
        fail(f"GET {path}: status {r.status}: {body[:200]!r}")

def fresh():
    c = conn(); get(c, "/small"); c.close()
    out = []
    for _ in range(count):
        t = now(); c = conn(); get(c, "/small"); out.append(now() - t); c.close()
    return out

def keepalive():
    c = conn(); get(c, "/small"); sock = c.sock
    out = []
    for _ in range(count):
        t = now(); get(c, "/small"); out.append(now() - t)
        if c.sock is not sock:
            fail("the connection was not kept alive")
    c.close()
    return out

def download():
    c = conn(); buf = bytearray(1 << 20); total = 0
    t = now()
    c.request("GET", f"/bytes/{count}", headers=headers)
    r = c.getresponse()
    if r.status != 200:
        fail(f"GET /bytes/{count}: status {r.status}")
    while True:
        k = r.readinto(buf)
        if not k:
            break
        total += k
    el = now() - t
    c.close()
    if total != count:
        fail(f"read {total} bytes of {count}")
    return [total, el]

def dns():
    qname = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5); s.connect((addr, 53))
    want = socket.inet_aton(addr)
    out = []
    for i in range(count + 1):
        qid = int.from_bytes(os.urandom(2), "big")
        q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + qname + struct.pack(">HH", 1, 1)
        t = now(); s.send(q); r = s.recv(512); el = now() - t
        rid, flags, _, an = struct.unpack(">HHHH", r[:8])
        if rid != qid or flags & 0xF != 0 or an < 1 or r[-4:] != want:
            fail(f"lookup of {name}: id {rid} of {qid}, rcode {flags & 0xF}, {an} answers, {r[-4:]!r}")
        if i > 0:
            out.append(el)
    return out

run = {"fresh": fresh, "keepalive": keepalive, "download": download, "dns": dns}.get(mode)
if run is None:
    fail(f"unknown mode {mode}")
try:
    print(mode, *run())
except (OSError, http.client.HTTPException) as e:
    fail(f"{type(e).__name__}: {e}")
`

// parseSamples reads the line of the egress client's output that starts
// with mode and returns its numbers (at least one; all non-negative).
func parseSamples(out, mode string) ([]int64, error) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != mode {
			continue
		}
		if len(f) == 1 {
			return nil, fmt.Errorf("egress client: %s: no samples", mode)
		}
		vs := make([]int64, 0, len(f)-1)
		for _, s := range f[1:] {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("egress client: %s: bad sample %q", mode, s)
			}
			vs = append(vs, v)
		}
		return vs, nil
	}
	return nil, fmt.Errorf("egress client: no %s line in %q", mode, clip(out, 200))
}

// nanos turns samples in nanoseconds into durations.
func nanos(vs []int64) []time.Duration {
	ds := make([]time.Duration, len(vs))
	for i, v := range vs {
		ds[i] = time.Duration(v)
	}
	return ds
}

// clip shortens s to at most n bytes for an error message.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
