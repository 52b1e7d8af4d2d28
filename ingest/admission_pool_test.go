package ingest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// With HighPool, a HIGH POST runs its accept on connections of its own: it is accepted while
// every connection of the API's pool is held (a burst of NORMAL accepts, a slow query). Were it
// to take one of the API's pool, it would wait for the held connections and the test fail at
// its 10 s bound.
func TestHighPostOnItsOwnConnections(t *testing.T) {
	var high *pgxpool.Pool
	e := newEnvWith(t, Config{}, zaptest.NewLogger(t), func(a *API) {
		var err error
		high, err = pgxpool.New(context.Background(), a.pool.Config().ConnString())
		require.NoError(t, err)
		t.Cleanup(high.Close)
		HighPool(high)(a)
	})
	e.template("otp", "security", "SMS")
	e.user(7, map[string]any{"phone": "+15551234567"})
	const otp = `{"userId":7,"template":"otp","channels":["SMS"],"priority":"HIGH"}`
	// The first request looks the API key up (through the API's pool) and caches it.
	res := e.post("k-1", otp)
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)

	ctx := context.Background()
	for range e.pool.Config().MaxConns {
		c, err := e.pool.Acquire(ctx)
		require.NoError(t, err)
		t.Cleanup(c.Release)
	}
	answered := make(chan response, 1)
	go func() {
		res, err := e.postAsync("k-2", otp)
		if err != nil {
			res.status = -1
		}
		answered <- res
	}()
	select {
	case res = <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the HIGH POST waited for a connection of the API's pool")
	}
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
}
