package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Times are stored as unix microseconds, which is the precision the store
// keeps, and read back in UTC.

// micros encodes t.
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros decodes a time stored by micros.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// nullMicros encodes an optional time.
func nullMicros(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: micros(*t), Valid: true}
}

// fromNullMicros decodes an optional time.
func fromNullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// nowIfZero returns t, or the current time when t is zero.
func nowIfZero(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().UTC()
	}
	return t
}

// encodeMetadata returns m as a JSON object; nil is "{}".
func encodeMetadata(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode metadata: %w", err)
	}
	return string(b), nil
}

// decodeMetadata returns the map stored by encodeMetadata, never nil.
func decodeMetadata(s string) (map[string]string, error) {
	m := map[string]string{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("decode metadata: %w", err)
	}
	if m == nil { // the JSON was null
		m = map[string]string{}
	}
	return m, nil
}

// encodeEntrypoint returns a JSON array, or NULL for an empty one.
func encodeEntrypoint(a []string) (sql.NullString, error) {
	if len(a) == 0 {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		return sql.NullString{}, fmt.Errorf("encode entrypoint: %w", err)
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// decodeEntrypoint returns the array stored by encodeEntrypoint; NULL is nil.
func decodeEntrypoint(v sql.NullString) ([]string, error) {
	if !v.Valid {
		return nil, nil
	}
	var a []string
	if err := json.Unmarshal([]byte(v.String), &a); err != nil {
		return nil, fmt.Errorf("decode entrypoint: %w", err)
	}
	return a, nil
}

// encodeStrings returns a as a JSON array, keeping nil apart from empty:
// nil is NULL.
func encodeStrings(a []string) (sql.NullString, error) {
	if a == nil {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		return sql.NullString{}, fmt.Errorf("encode list: %w", err)
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// decodeStrings returns the list stored by encodeStrings: NULL is nil, an
// empty array an empty, non-nil list.
func decodeStrings(v sql.NullString) ([]string, error) {
	if !v.Valid {
		return nil, nil
	}
	a := []string{}
	if err := json.Unmarshal([]byte(v.String), &a); err != nil {
		return nil, fmt.Errorf("decode list: %w", err)
	}
	return a, nil
}

// sqlLimit returns the LIMIT that takes up to limit rows; limit <= 0 takes
// all (SQLite's -1).
func sqlLimit(limit int64) int64 {
	if limit <= 0 {
		return -1
	}
	return limit
}

// inStrings returns the condition "column IN (?, ...)" that selects rows
// whose column is one of values, and its arguments; values must not be
// empty.
func inStrings(column string, values []string) (string, []any) {
	args := make([]any, len(values))
	for i, v := range values {
		args[i] = v
	}
	return column + " IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(values)), ", ") + ")", args
}

// queryAll runs query on db and returns every row read by scan; op names
// the operation in errors.
func queryAll[T any](ctx context.Context, db *sql.DB, op string, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}
