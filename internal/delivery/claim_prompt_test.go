package delivery_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// TestPromptClaimCommitsWithoutWaitingForItsFlush: ClaimBatchPrompt claims as ClaimBatch
// does, and sets synchronous_commit = off for its own transaction only (what its commit
// reads); ClaimBatch leaves it on. Seen inside an explicit transaction, where the setting
// lives until the commit, for one row and for a batch of rows of one day and of two days
// (the three statements a claim can take).
func TestPromptClaimCommitsWithoutWaitingForItsFlush(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	client := deliverytest.Client(t, pool)
	_, oldID := deliverytest.InsertAt(t, pool, client, deliverytest.OldDay(t, pool), deliverytest.OldDay(t, pool))

	claimIn := func(claim func(context.Context, delivery.DB, []delivery.Seen) (map[string]delivery.Claimed, error),
		seen []delivery.Seen) (claimed int, setting string) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck // only read from
		got, err := claim(ctx, tx, seen)
		require.NoError(t, err)
		require.NoError(t, tx.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&setting))
		return len(got), setting
	}
	for _, c := range []struct {
		name string
		seen func() []delivery.Seen
	}{
		{"one", func() []delivery.Seen {
			return []delivery.Seen{{ID: deliverytest.One(t, pool, deliverytest.Spec{ClientID: client})}}
		}},
		{"a batch of one day", func() []delivery.Seen {
			return []delivery.Seen{{ID: deliverytest.One(t, pool, deliverytest.Spec{ClientID: client})},
				{ID: deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, Status: herald.StatusQueued})}}
		}},
		{"a batch of two days", func() []delivery.Seen {
			return []delivery.Seen{{ID: oldID}, {ID: deliverytest.One(t, pool, deliverytest.Spec{ClientID: client})}}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen := c.seen()
			n, setting := claimIn(delivery.ClaimBatchPrompt, seen)
			require.Equal(t, len(seen), n, "the prompt claim takes what the claim takes")
			require.Equal(t, "off", setting, "the prompt claim's transaction commits without waiting for its flush")
			n, setting = claimIn(delivery.ClaimBatch, seen)
			require.Equal(t, len(seen), n)
			require.Equal(t, "on", setting, "the claim's transaction waits for its flush")
		})
	}

	// Committed on its own (as dispatch runs it), the claim leaves the session as it was.
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	id := deliverytest.One(t, pool, deliverytest.Spec{ClientID: client})
	got, err := delivery.ClaimBatchPrompt(ctx, conn, []delivery.Seen{{ID: id}})
	require.NoError(t, err)
	require.Len(t, got, 1)
	var setting string
	require.NoError(t, conn.QueryRow(ctx, `SHOW synchronous_commit`, pgx.QueryExecModeSimpleProtocol).Scan(&setting))
	require.Equal(t, "on", setting)
}
