package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/store"
)

// sqlNow is the database's clock in unix microseconds, which lease times
// use. SQLite reads the host's clock with millisecond precision, once per
// statement, so every use in one statement is the same instant.
const sqlNow = `(CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000)`

// leaseColumns lists the columns scanLease reads, in its order.
const leaseColumns = `lease_holder, lease_epoch, lease_expires_at`

// scanLease reads one row of leaseColumns; a free lease is the zero Lease.
func scanLease(row rowScanner) (store.Lease, error) {
	var (
		l       store.Lease
		expires sql.NullInt64
	)
	if err := row.Scan(&l.Holder, &l.Epoch, &expires); err != nil {
		return store.Lease{}, err
	}
	if l.Holder == "" {
		return store.Lease{}, nil
	}
	if expires.Valid {
		l.ExpiresAt = fromMicros(expires.Int64)
	}
	return l, nil
}

// AcquireLease makes holder the stream's lease holder until ttl from now
// (creating the stream if absent) if the lease is free, expired or already
// holder's, in one statement. The epoch increases unless holder renews its
// live lease. ErrConflict, with the current lease, when another holder's
// lease is live.
func (st *Store) AcquireLease(ctx context.Context, stream, holder string, ttl time.Duration) (store.Lease, error) {
	if holder == "" {
		return store.Lease{}, fmt.Errorf("acquire lease of stream %s: empty holder", stream)
	}
	l, err := scanLease(st.w.QueryRowContext(ctx, `INSERT INTO streams
		(id, next_seq, lease_holder, lease_epoch, lease_expires_at)
		VALUES (?1, 1, ?2, 1, `+sqlNow+` + ?3)
		ON CONFLICT (id) DO UPDATE SET
			lease_epoch = CASE WHEN lease_holder = excluded.lease_holder
				AND lease_expires_at > `+sqlNow+` THEN lease_epoch ELSE lease_epoch + 1 END,
			lease_holder = excluded.lease_holder,
			lease_expires_at = excluded.lease_expires_at
		WHERE lease_holder = '' OR lease_holder = excluded.lease_holder
			OR lease_expires_at <= `+sqlNow+`
		RETURNING `+leaseColumns, stream, holder, ttl.Microseconds()))
	if errors.Is(err, sql.ErrNoRows) {
		cur, err := scanLease(st.w.QueryRowContext(ctx,
			`SELECT `+leaseColumns+` FROM streams WHERE id = ?`, stream))
		if err != nil {
			return store.Lease{}, fmt.Errorf("acquire lease: %w", err)
		}
		return cur, fmt.Errorf("acquire lease of stream %s: held by %s until %v: %w",
			stream, cur.Holder, cur.ExpiresAt, store.ErrConflict)
	}
	if err != nil {
		return store.Lease{}, fmt.Errorf("acquire lease: %w", err)
	}
	return l, nil
}

// RenewLease extends holder's live lease of epoch to ttl from now; ErrFenced
// if the stream's lease is no longer (holder, epoch) or it expired.
func (st *Store) RenewLease(ctx context.Context, stream, holder string, epoch int64, ttl time.Duration) (store.Lease, error) {
	l, err := scanLease(st.w.QueryRowContext(ctx, `UPDATE streams
		SET lease_expires_at = `+sqlNow+` + ?
		WHERE id = ? AND lease_holder = ? AND lease_holder <> '' AND lease_epoch = ?
			AND lease_expires_at > `+sqlNow+`
		RETURNING `+leaseColumns, ttl.Microseconds(), stream, holder, epoch))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Lease{}, fmt.Errorf("renew lease of stream %s by %s with epoch %d: %w",
			stream, holder, epoch, store.ErrFenced)
	}
	if err != nil {
		return store.Lease{}, fmt.Errorf("renew lease: %w", err)
	}
	return l, nil
}

// ReleaseLease frees holder's lease of epoch at once (a no-op if it is no
// longer theirs). The epoch stays, so the next holder's is higher.
func (st *Store) ReleaseLease(ctx context.Context, stream, holder string, epoch int64) error {
	if _, err := st.w.ExecContext(ctx, `UPDATE streams SET lease_holder = '', lease_expires_at = NULL
		WHERE id = ? AND lease_holder = ? AND lease_epoch = ?`, stream, holder, epoch); err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	return nil
}

// GetLease returns the stream's lease, expired or not; the zero Lease when
// the stream is unknown or its lease free.
func (st *Store) GetLease(ctx context.Context, stream string) (store.Lease, error) {
	l, err := scanLease(st.r.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM streams WHERE id = ?`, stream))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Lease{}, nil
	}
	if err != nil {
		return store.Lease{}, fmt.Errorf("get lease: %w", err)
	}
	return l, nil
}
