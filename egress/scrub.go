package egress

import (
	"net/http"
	"strings"
)

// Response scrubbing. The proxy never puts a credential into a response,
// but an upstream may echo the request's headers back (a debugging
// endpoint, a reverse proxy that reflects what it got): through the
// intercepted connection that would hand the box the value it must never
// see. So the header values of each response relayed on an intercepted or
// rewritten connection lose every credential the box's proxy could have
// delivered: a secret's value becomes its placeholder (what the box sent),
// a binding's header value, and the token after its scheme ("Bearer
// <token>"), become withheldMark. Bodies stream unchanged and are not
// scrubbed: bind credentials to destinations that do not reflect them.

// withheldMark replaces a binding's credential in a response header.
const withheldMark = "[credential withheld by AstraBox]"

// minScrubLen is the shortest value scrubbed: shorter ones would match
// ordinary header text (and are no credential worth the name).
const minScrubLen = 8

// scrubHeaders rewrites h as the comment above says; it returns how many
// header values it changed.
func scrubHeaders(h http.Header, secrets []Secret, bindings []Binding) int {
	type swap struct{ old, new string }
	var swaps []swap
	for _, s := range secrets {
		if len(s.Value) >= minScrubLen {
			swaps = append(swaps, swap{s.Value, s.Placeholder})
		}
	}
	for _, b := range bindings {
		for _, bh := range b.Headers {
			if len(bh.Value) >= minScrubLen {
				swaps = append(swaps, swap{bh.Value, withheldMark})
			}
			if _, token, ok := strings.Cut(bh.Value, " "); ok && len(token) >= minScrubLen {
				swaps = append(swaps, swap{token, withheldMark})
			}
		}
	}
	if len(swaps) == 0 {
		return 0
	}
	n := 0
	for k, vs := range h {
		for i, v := range vs {
			orig := v
			for _, sw := range swaps {
				v = strings.ReplaceAll(v, sw.old, sw.new)
			}
			if v != orig {
				h[k][i] = v
				n++
			}
		}
	}
	return n
}
