package egress

import "net/http"

// ScrubResponse makes resp's header values and body free of the secrets'
// values, as the proxy does for the responses it relays to a box (see the
// comment at the top of scrub.go): each value becomes its placeholder. A
// gzip or deflate body is decoded (Content-Encoding removed); a body of
// any other content coding cannot be scrubbed and is an error, and resp
// must then not be relayed. The body is scrubbed as it is read, so a
// streamed answer keeps streaming.
func ScrubResponse(resp *http.Response, secrets []Secret) error {
	s := newScrubber(secrets, nil)
	if s.empty() {
		return nil
	}
	return s.scrubResponse(resp, func(int, int) {})
}
