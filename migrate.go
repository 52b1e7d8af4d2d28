package herald

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed sql/migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the embedded SQL migrations.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "sql/migrations")
	if err != nil {
		panic(err) // the embed pattern above guarantees the folder
	}
	return sub
}

// Migrate applies every pending migration. It is safe to call from many processes at once:
// goose takes a PostgreSQL advisory lock for the duration.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]*goose.MigrationResult, error) {
	p, db, err := migrationProvider(pool)
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

// MigrationsPending reports whether any embedded migration is not yet applied.
func MigrationsPending(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	p, db, err := migrationProvider(pool)
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

func migrationProvider(pool *pgxpool.Pool) (*goose.Provider, *sql.DB, error) {
	db := stdlib.OpenDBFromPool(pool)
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, Migrations(), goose.WithSessionLocker(locker))
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, db, nil
}
