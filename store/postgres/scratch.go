package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// CreateScratch creates an empty database with a random name (prefix and
// a random suffix; UTF8, C collation) on dsn's server, for benchmarks and
// tests, and returns a DSN naming it and a drop func that removes it (with
// every connection still open to it). It needs the CREATEDB right.
func CreateScratch(ctx context.Context, dsn, prefix string) (string, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", nil, fmt.Errorf("database name: %w", err)
	}
	name := prefix + hex.EncodeToString(b)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"); err != nil {
		return "", nil, fmt.Errorf("create database: %w", err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, dsn); err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = conn.Close(ctx)
		}
	}
	return withDatabase(dsn, name), drop, nil
}

// withDatabase returns dsn (a postgres:// URL or a key=value string)
// naming database name instead of its own.
func withDatabase(dsn, name string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			u.Path, u.RawPath = "/"+name, ""
			return u.String()
		}
	}
	return dsn + " dbname=" + name // key=value: the last setting wins
}
