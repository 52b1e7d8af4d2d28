package ingest

import (
	"context"
	"io/fs"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/migrate"
	"github.com/heraldhq/herald/internal/stacktest"
)

// emptyDatabase creates a database with no migration applied and returns a pool on it.
func emptyDatabase(t *testing.T) *pgxpool.Pool {
	t.Helper()
	admin := os.Getenv(stacktest.EnvPostgres)
	require.NotEmpty(t, admin, "%s is not set: run the tests with `make test`", stacktest.EnvPostgres)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	defer conn.Close(ctx)
	name := stacktest.Name("herald_empty")
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	require.NoError(t, err)
	u.Path = "/" + name
	pool, err := pgxpool.New(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// TestMigrations applies every migration to an empty database, then again as a no-op.
func TestMigrations(t *testing.T) {
	pool := emptyDatabase(t)
	ctx := context.Background()

	pending, err := migrate.Pending(ctx, pool)
	require.NoError(t, err)
	require.True(t, pending)

	files, err := fs.Glob(herald.Migrations(), "*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	res, err := migrate.Up(ctx, pool)
	require.NoError(t, err)
	require.Len(t, res, len(files), "every migration applied once")

	pending, err = migrate.Pending(ctx, pool)
	require.NoError(t, err)
	require.False(t, pending)

	res, err = migrate.Up(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, res, "a second run applies nothing")

	// The schema the API needs is there.
	for _, table := range []string{"api_client", "template", "user_contact", "push_token", "user_preference", "notification", "delivery", "delivery_attempt"} {
		var exists bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists))
		require.True(t, exists, table)
	}
}
