package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/apikey"
)

// TestWebhookSecretsRotation: rotation returns the new secret first and the previous one
// while its window is open; the cache keeps a client's secrets for its TTL only.
func TestWebhookSecretsRotation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c, err := apikey.CreateAPIClient(ctx, e.pool, "hooks", apikey.DefaultScopes())
	require.NoError(t, err)
	fresh := apikey.NewWebhookSecrets(e.pool, -1)
	cached := apikey.NewWebhookSecrets(e.pool, time.Hour)

	got, err := cached.WebhookSecrets(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, []string{c.WebhookSecret}, got)

	rotated, err := apikey.RotateWebhookSecret(ctx, e.pool, c.ID, time.Hour)
	require.NoError(t, err)
	got, err = fresh.WebhookSecrets(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, []string{rotated, c.WebhookSecret}, got)
	got, err = cached.WebhookSecrets(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, []string{c.WebhookSecret}, got, "cached until the TTL")

	require.NoError(t, apikey.ExpirePreviousWebhookSecret(ctx, e.pool, c.ID))
	got, err = fresh.WebhookSecrets(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, []string{rotated}, got)

	// Rotating twice within a window drops the oldest secret.
	second, err := apikey.RotateWebhookSecret(ctx, e.pool, c.ID, time.Hour)
	require.NoError(t, err)
	third, err := apikey.RotateWebhookSecret(ctx, e.pool, c.ID, time.Hour)
	require.NoError(t, err)
	got, err = fresh.WebhookSecrets(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, []string{third, second}, got)

	_, err = apikey.RotateWebhookSecret(ctx, e.pool, "01a22bef-0000-7000-8000-000000000000", time.Hour)
	require.ErrorIs(t, err, apikey.ErrNotFound)
	require.ErrorIs(t, apikey.ExpirePreviousWebhookSecret(ctx, e.pool, "nope"), apikey.ErrNotFound)
	_, err = apikey.RotateWebhookSecret(ctx, e.pool, c.ID, -time.Second)
	require.Error(t, err)
}
