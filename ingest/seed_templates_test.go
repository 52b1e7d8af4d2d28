package ingest

import (
	"context"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/stacktest"
)

func TestSeedTemplates(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()

	names, err := SeedTemplates(ctx, pool, fstest.MapFS{
		"otp.json":   {Data: []byte(`{"category":"security","channels":["SMS"],"content":{"SMS":{"default":{"text":"Code {{.code}}"}}}}`)},
		"promo.json": {Data: []byte(`{"category":"marketing","channels":["EMAIL"],"content":{}}`)},
		"README.md":  {Data: []byte("not a template")},
	})
	require.NoError(t, err)
	require.Equal(t, []string{"otp", "promo"}, names)
	var category, content string
	require.NoError(t, pool.QueryRow(ctx, `SELECT category, content::text FROM template WHERE name = 'otp'`).Scan(&category, &content))
	require.Equal(t, "security", category)
	require.Contains(t, content, "{{.code}}")

	// Seeding again replaces; an invalid file is refused with its name and reason, and
	// stores nothing of its own.
	_, err = SeedTemplates(ctx, pool, fstest.MapFS{
		"bad.json": {Data: []byte(`{"category":"security","channels":["SMS"],"content":{"SMS":{"default":{"text":"{{.code"}}}}`)},
	})
	require.ErrorContains(t, err, "bad.json")
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM template WHERE name = 'bad'`).Scan(&n))
	require.Zero(t, n)

	_, err = SeedTemplates(ctx, pool, fstest.MapFS{"nocat.json": {Data: []byte(`{"channels":["SMS"]}`)}})
	require.ErrorContains(t, err, "category is required")
}
