// Package migrate applies herald's embedded migrations (herald.Migrations) with goose. It is
// kept out of the root package so that the shared vocabulary imports nothing but the
// standard library.
package migrate

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/heraldhq/herald"
)

// Up applies every pending migration. It is safe to call from many processes at once: goose
// takes a PostgreSQL advisory lock for the duration.
func Up(ctx context.Context, pool *pgxpool.Pool) ([]*goose.MigrationResult, error) {
	p, db, err := provider(pool)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	res, err := p.Up(ctx)
	if err != nil {
		return res, fmt.Errorf("apply migrations: %w", err)
	}
	return res, nil
}

// UpTo applies the pending migrations up to and including version: tests use it to build a
// database as an earlier herald left it.
func UpTo(ctx context.Context, pool *pgxpool.Pool, version int64) ([]*goose.MigrationResult, error) {
	p, db, err := provider(pool)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	res, err := p.UpTo(ctx, version)
	if err != nil {
		return res, fmt.Errorf("apply migrations up to %d: %w", version, err)
	}
	return res, nil
}

// Pending reports whether any embedded migration is not yet applied.
func Pending(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	p, db, err := provider(pool)
	if err != nil {
		return false, err
	}
	defer db.Close()
	pending, err := p.HasPending(ctx)
	if err != nil {
		return false, fmt.Errorf("check migrations: %w", err)
	}
	return pending, nil
}

func provider(pool *pgxpool.Pool) (*goose.Provider, *sql.DB, error) {
	db := stdlib.OpenDBFromPool(pool)
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, herald.Migrations(), goose.WithSessionLocker(locker))
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, db, nil
}
