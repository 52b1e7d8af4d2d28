package ingest

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/delivery"
)

func TestIdempotencyReplay(t *testing.T) {
	e := newEnv(t)
	e.template("otp", "security", "SMS", "EMAIL")
	e.user(7, map[string]any{"phone": "+15551234567"})

	first := e.post("k1", `{"userId":7,"template":"otp","channels":["SMS","EMAIL"],"payload":{"a":1,"b":"x"}}`)
	require.Equal(t, http.StatusAccepted, first.status, "%s", first.body)
	require.Empty(t, first.header.Get("Idempotent-Replayed"))
	body := first.json(t)
	require.Len(t, body["deliveries"], 1)
	require.Equal(t, []any{map[string]any{"channel": "EMAIL", "reason": "no_contact"}}, body["suppressed"])
	require.Equal(t, "/api/notifications/"+body["id"].(string), first.header.Get("Location"))

	// The same request, written differently: member order, white space, channel order and
	// an explicit default priority do not change the body's meaning.
	same := e.post("k1", `{ "priority":"NORMAL", "payload":{"b":"x","a":1}, "channels":["EMAIL","SMS"], "template":"otp", "userId":7 }`)
	require.Equal(t, http.StatusAccepted, same.status, "%s", same.body)
	require.Equal(t, "true", same.header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.body), string(same.body), "a replay answers byte for byte the same")

	n, d := e.rows()
	require.Equal(t, 1, n)
	require.Equal(t, 1, d)

	// Same key, different body.
	for _, other := range []string{
		`{"userId":7,"template":"otp","channels":["SMS","EMAIL"],"payload":{"a":2,"b":"x"}}`,
		`{"userId":7,"template":"otp","channels":["SMS"],"payload":{"a":1,"b":"x"}}`,
		`{"userId":7,"template":"otp","channels":["SMS","EMAIL"],"payload":{"a":1,"b":"x"},"priority":"HIGH"}`,
	} {
		res := e.post("k1", other)
		requireProblem(t, res, http.StatusUnprocessableEntity, codeIdempotencyKeyReused)
	}
	n, d = e.rows()
	require.Equal(t, 1, n)
	require.Equal(t, 1, d)

	// Keys are scoped per client: another client's "k1" is a new notification.
	c2, err := apikey.CreateAPIClient(context.Background(), e.pool, "other", apikey.DefaultScopes())
	require.NoError(t, err)
	key2 := c2.Key
	res := e.do(http.MethodPost, "/api/notifications",
		`{"userId":7,"template":"otp","channels":["SMS"]}`,
		map[string]string{"Idempotency-Key": "k1", "Authorization": "Bearer " + key2})
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	require.Empty(t, res.header.Get("Idempotent-Replayed"))
	require.NotEqual(t, body["id"], res.json(t)["id"])
}

// TestIdempotencyConcurrent sends 50 requests with one key at once: exactly one notification
// exists afterwards and every request got its answer.
func TestIdempotencyConcurrent(t *testing.T) {
	e := newEnv(t)
	e.template("otp", "security", "SMS")
	e.user(9, map[string]any{"phone": "+15551234567"})

	const n = 50
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make([]response, n)
		errs    = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = e.postAsync("same-key", `{"userId":9,"template":"otp","channels":["SMS"],"priority":"HIGH"}`)
		})
	}
	close(start)
	wg.Wait()

	replayed := 0
	for i, r := range results {
		require.NoError(t, errs[i])
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		require.Equal(t, string(results[0].body), string(r.body))
		if r.header.Get("Idempotent-Replayed") == "true" {
			replayed++
		}
	}
	require.Equal(t, n-1, replayed, "exactly one request created the notification")
	notifications, deliveries := e.rows()
	require.Equal(t, 1, notifications)
	require.Equal(t, 1, deliveries)
}

// TestIdempotencyWaitsForConcurrentInsert drives the ON CONFLICT path deterministically: a
// transaction holding the key uncommitted makes the POST's insert wait; once it commits, the
// POST answers with the stored answer and has written nothing itself.
func TestIdempotencyWaitsForConcurrentInsert(t *testing.T) {
	e := newEnv(t)
	e.template("otp", "security", "SMS")
	e.user(9, map[string]any{"phone": "+15551234567"})
	const body = `{"userId":9,"template":"otp","channels":["SMS"]}`
	in, err := decodeNotification(strings.NewReader(body), DefaultMaxPayloadBytes)
	require.NoError(t, err)
	nid := uuid.Must(uuid.NewV7()) // today's partition
	stored := `{"id":"` + nid.String() + `","deliveries":[],"suppressed":[{"channel":"SMS","reason":"opted_out"}]}`

	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	inserted, err := delivery.Insert(ctx, tx, delivery.Notification{ID: nid,
		ClientID: e.clientID, IdempotencyKey: "racing", RequestHash: in.hash(), UserID: 9, Template: "otp",
		Category: "security", Priority: herald.PriorityNormal, Response: []byte(stored)})
	require.NoError(t, err)
	require.True(t, inserted)

	type result struct {
		res response
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := e.postAsync("racing", body)
		done <- result{res, err}
	}()

	// Wait until the POST's insert blocks on the uncommitted key.
	require.Eventually(t, func() bool {
		var waiting bool
		err := e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO notification%')`).Scan(&waiting)
		return err == nil && waiting
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, tx.Commit(ctx))

	r := <-done
	require.NoError(t, r.err)
	res := r.res
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	require.Equal(t, "true", res.header.Get("Idempotent-Replayed"))
	require.JSONEq(t, stored, string(res.body))
	n, d := e.rows()
	require.Equal(t, 1, n)
	require.Zero(t, d)
}
