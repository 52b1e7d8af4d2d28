package ingest

import (
	"context"
	"crypto/sha256"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/migrate"
	"github.com/heraldhq/herald/internal/openapitest"
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

// TestMigrationKeepsOldKeys: a key created before scopes existed (inserted as herald did
// then) keeps working with every scope after migration 00040, and gets a webhook secret.
func TestMigrationKeepsOldKeys(t *testing.T) {
	pool := emptyDatabase(t)
	ctx := context.Background()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, herald.Migrations())
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 30)
	require.NoError(t, err)

	key := "hk_" + strings.Repeat("k", 43) // the shape apikey makes
	h := sha256.Sum256([]byte(key))
	const oldInsert = `INSERT INTO api_client (id, name, key_prefix, key_hash) VALUES ($1, $2, $3, $4)`
	id := uuid.NewString()
	_, err = pool.Exec(ctx, oldInsert, id, "old", key[:11], h[:])
	require.NoError(t, err)

	_, err = migrate.Up(ctx, pool)
	require.NoError(t, err)
	clients, err := apikey.ListAPIClients(ctx, pool)
	require.NoError(t, err)
	require.Len(t, clients, 1)
	require.Equal(t, id, clients[0].ID)
	require.Equal(t, apikey.AllScopes(), clients[0].Scopes, "an old key has every scope")

	secrets, err := apikey.NewWebhookSecrets(pool, -1).WebhookSecrets(ctx, id)
	require.NoError(t, err)
	require.Len(t, secrets, 1)
	require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, secrets[0], "32 bytes, standard base64")

	// The old key calls a route of each scope.
	api, err := New(Config{}, pool, zap.NewNop())
	require.NoError(t, err)
	for _, rt := range routes(api) {
		if rt.method != http.MethodGet || strings.Contains(rt.path, "notifications") {
			continue
		}
		path := strings.NewReplacer("{userId}", "1", "{name}", "none").Replace(rt.path)
		req := httptest.NewRequest(rt.method, path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		openapitest.Handler(t, api.Handler()).ServeHTTP(rec, req)
		require.NotEqual(t, http.StatusForbidden, rec.Code, "%s %s: %s", rt.method, path, rec.Body)
		require.NotEqual(t, http.StatusUnauthorized, rec.Code, "%s %s: %s", rt.method, path, rec.Body)
	}

	// An insert that names no scopes grants nothing, and still gets a secret of its own.
	id2 := uuid.NewString()
	_, err = pool.Exec(ctx, oldInsert, id2, "new", "hk_x", []byte("x"))
	require.NoError(t, err)
	clients, err = apikey.ListAPIClients(ctx, pool)
	require.NoError(t, err)
	require.Len(t, clients, 2)
	require.Empty(t, clients[1].Scopes)
	secrets2, err := apikey.NewWebhookSecrets(pool, -1).WebhookSecrets(ctx, id2)
	require.NoError(t, err)
	require.Len(t, secrets2, 1)
	require.NotEqual(t, secrets[0], secrets2[0])
	require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, secrets2[0])
	_, err = pool.Exec(ctx, `UPDATE api_client SET scopes = '{"users:wrte"}'`)
	require.Error(t, err, "an unknown scope is refused by the database too")

	// Unknown clients have no secret.
	for _, id := range []string{uuid.NewString(), "not-a-uuid"} {
		s, err := apikey.NewWebhookSecrets(pool, 0).WebhookSecrets(ctx, id)
		require.NoError(t, err)
		require.Empty(t, s)
	}
}
