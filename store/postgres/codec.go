package postgres

import "time"

// nowIfZero returns t, or the current time when t is zero.
func nowIfZero(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().UTC()
	}
	return t
}
