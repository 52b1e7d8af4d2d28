package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWebhookSecretsRotation: rotation returns the new secret first and the previous one
// while its window is open; the cache keeps a client's secrets for its TTL only.
func TestWebhookSecretsRotation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c, err := CreateAPIClient(ctx, e.pool, "hooks", DefaultScopes())
	require.NoError(t, err)
	fresh := NewWebhookSecrets(e.pool, -1)
	cached := NewWebhookSecrets(e.pool, time.Hour)

	got, err := cached.WebhookSecrets(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, []string{c.WebhookSecret}, got)

	rotated, err := RotateWebhookSecret(ctx, e.pool, c.ID, time.Hour)
	require.NoError(t, err)
	got, err = fresh.WebhookSecrets(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, []string{rotated, c.WebhookSecret}, got)
	got, err = cached.WebhookSecrets(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, []string{c.WebhookSecret}, got, "cached until the TTL")

	require.NoError(t, ExpirePreviousWebhookSecret(ctx, e.pool, c.ID))
	got, err = fresh.WebhookSecrets(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, []string{rotated}, got)

	// Rotating twice within a window drops the oldest secret.
	second, err := RotateWebhookSecret(ctx, e.pool, c.ID, time.Hour)
	require.NoError(t, err)
	third, err := RotateWebhookSecret(ctx, e.pool, c.ID, time.Hour)
	require.NoError(t, err)
	got, err = fresh.WebhookSecrets(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, []string{third, second}, got)

	_, err = RotateWebhookSecret(ctx, e.pool, "01a22bef-0000-7000-8000-000000000000", time.Hour)
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, ExpirePreviousWebhookSecret(ctx, e.pool, "nope"), ErrNotFound)
	_, err = RotateWebhookSecret(ctx, e.pool, c.ID, -time.Second)
	require.Error(t, err)
}
