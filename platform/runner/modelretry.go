package runner

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// What a model endpoint's hiccup gets: a request that failed before its
// answer began is sent again, a bounded number of times (the profile's
// model.retries), after the pause the endpoint asked for (Retry-After) or
// a growing one. Once an answer streams, nothing is sent again: what the
// program received is its own to handle.

// retryPause bounds: the first pause, the longest a growing one gets, and
// the longest Retry-After honoured (an endpoint asking for more is not
// retried: its answer goes back as it is).
const (
	firstRetryPause = 500 * time.Millisecond
	maxRetryPause   = 8 * time.Second
	maxRetryAfter   = 60 * time.Second
)

// retryableStatus reports whether an answer with this status is a
// hiccup worth another try: too many requests, or the endpoint (or a
// gateway before it) failing or overloaded.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout, 529: // 529: overloaded (Anthropic)
		return true
	}
	return false
}

// retryPause is the pause before try n+1 (n counts from 1) after an answer
// with header h (nil: no answer): the Retry-After it names, else a pause
// doubling from firstRetryPause up to maxRetryPause. ok is false when the
// endpoint asks for a pause longer than maxRetryAfter.
func retryPause(n int, h http.Header, now time.Time) (pause time.Duration, ok bool) {
	if h != nil {
		if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
			if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
				pause = time.Duration(secs) * time.Second
			} else if at, err := http.ParseTime(v); err == nil {
				pause = max(at.Sub(now), 0)
			}
			if pause > maxRetryAfter {
				return 0, false
			}
			if pause > 0 {
				return pause, true
			}
		}
	}
	pause = firstRetryPause
	for i := 1; i < n && pause < maxRetryPause; i++ {
		pause *= 2
	}
	return min(pause, maxRetryPause), true
}
