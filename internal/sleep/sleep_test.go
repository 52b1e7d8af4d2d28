package sleep

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFor(t *testing.T) {
	start := time.Now()
	require.NoError(t, For(context.Background(), 20*time.Millisecond))
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)

	require.NoError(t, For(context.Background(), 0))
	require.NoError(t, For(context.Background(), -time.Second))
	require.NoError(t, Until(context.Background(), time.Now().Add(-time.Hour)))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, For(ctx, 0), context.Canceled, "an ended context, no wait")
	start = time.Now()
	require.ErrorIs(t, For(ctx, time.Hour), context.Canceled)
	require.Less(t, time.Since(start), time.Minute, "returns when the context ends, not after d")

	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, For(ctx, time.Hour), context.DeadlineExceeded)
}
