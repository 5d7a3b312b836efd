package postgres

import "time"

// nowIfZero returns t, or the current time when t is zero.
func nowIfZero(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().UTC()
	}
	return t
}

// sqlLimit returns the LIMIT argument that takes up to limit rows; limit
// <= 0 takes all (LIMIT NULL).
func sqlLimit(limit int64) *int64 {
	if limit <= 0 {
		return nil
	}
	return &limit
}

// anyOf returns the text[] argument of a condition "($n::text[] IS NULL OR
// column = ANY($n))": NULL, selecting every row, when values is empty.
func anyOf(values []string) []string {
	if len(values) == 0 {
		return nil
	}
	return values
}
