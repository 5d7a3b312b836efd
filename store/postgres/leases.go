package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store"
)

// Lease times are the database's clock: now(), the start of the statement's
// transaction, so that replicas whose clocks differ agree on every expiry.
// ttl is passed as microseconds, the precision of timestamptz.

// leaseColumns lists the columns scanLease reads, in its order.
const leaseColumns = `lease_holder, lease_epoch, lease_expires_at`

// scanLease reads one row of leaseColumns; a free lease is the zero Lease.
func scanLease(row pgx.Row) (store.Lease, error) {
	var (
		l       store.Lease
		expires *time.Time
	)
	if err := row.Scan(&l.Holder, &l.Epoch, &expires); err != nil {
		return store.Lease{}, err
	}
	if l.Holder == "" {
		return store.Lease{}, nil
	}
	if expires != nil {
		l.ExpiresAt = expires.UTC()
	}
	return l, nil
}

// AcquireLease makes holder the stream's lease holder until ttl from now
// (creating the stream if absent) if the lease is free, expired or already
// holder's, in one statement. The epoch increases unless holder renews its
// live lease. ErrConflict, with the current lease, when another holder's
// lease is live; the row lock lets one of concurrent acquirers of a free
// lease win.
func (st *Store) AcquireLease(ctx context.Context, stream, holder string, ttl time.Duration) (store.Lease, error) {
	if holder == "" {
		return store.Lease{}, fmt.Errorf("acquire lease of stream %s: empty holder", stream)
	}
	l, err := scanLease(st.pool.QueryRow(ctx, `INSERT INTO streams AS s
		(id, next_seq, lease_holder, lease_epoch, lease_expires_at)
		VALUES ($1, 1, $2, 1, now() + $3::bigint * interval '1 microsecond')
		ON CONFLICT (id) DO UPDATE SET
			lease_epoch = CASE WHEN s.lease_holder = excluded.lease_holder
				AND s.lease_expires_at > now() THEN s.lease_epoch ELSE s.lease_epoch + 1 END,
			lease_holder = excluded.lease_holder,
			lease_expires_at = excluded.lease_expires_at
		WHERE s.lease_holder = '' OR s.lease_holder = excluded.lease_holder
			OR s.lease_expires_at <= now()
		RETURNING `+leaseColumns, stream, holder, ttl.Microseconds()))
	if errors.Is(err, pgx.ErrNoRows) {
		cur, err := scanLease(st.pool.QueryRow(ctx,
			`SELECT `+leaseColumns+` FROM streams WHERE id = $1`, stream))
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
	l, err := scanLease(st.pool.QueryRow(ctx, `UPDATE streams
		SET lease_expires_at = now() + $1::bigint * interval '1 microsecond'
		WHERE id = $2 AND lease_holder = $3 AND lease_holder <> '' AND lease_epoch = $4
			AND lease_expires_at > now()
		RETURNING `+leaseColumns, ttl.Microseconds(), stream, holder, epoch))
	if errors.Is(err, pgx.ErrNoRows) {
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
	if _, err := st.pool.Exec(ctx, `UPDATE streams SET lease_holder = '', lease_expires_at = NULL
		WHERE id = $1 AND lease_holder = $2 AND lease_epoch = $3`, stream, holder, epoch); err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	return nil
}

// GetLease returns the stream's lease, expired or not; the zero Lease when
// the stream is unknown or its lease free.
func (st *Store) GetLease(ctx context.Context, stream string) (store.Lease, error) {
	l, err := scanLease(st.pool.QueryRow(ctx, `SELECT `+leaseColumns+` FROM streams WHERE id = $1`, stream))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Lease{}, nil
	}
	if err != nil {
		return store.Lease{}, fmt.Errorf("get lease: %w", err)
	}
	return l, nil
}
