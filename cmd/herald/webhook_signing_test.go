package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/senders/sim"
)

// TestWebhooksSignedPerClient runs the whole pipeline (herald serve: ingest, relay, dispatch,
// the webhook sender) with the simulator checking signatures with client A's secret: A's
// webhook is accepted and SENT, client B's webhook to the same URL is refused (401, FAILED).
func TestWebhooksSignedPerClient(t *testing.T) {
	st := newStack(t)
	create := func(name, scopes string) (key, secret string) {
		out, err := runHerald(t, "apikey", "create", "--name", name, "--scopes", scopes, "--database-url", st.dsn)
		require.NoError(t, err, out)
		return apiKeyLine.FindStringSubmatch(out)[1], secretLine.FindStringSubmatch(out)[1]
	}
	keyA, secretA := create("a", "operator")
	keyB, _ := create("b", "notifications:send,notifications:read")
	sm := startSim(t, "--sim-webhook-secret", secretA)
	addr := heraldtest.FreeAddr(t)
	st.serve(t, "serve", addr, sm, fastRecovery...)
	base := "http://" + addr
	doJSON(t, http.MethodPut, base+"/api/templates/otp", keyA, otpTemplate, nil, http.StatusOK)
	doJSON(t, http.MethodPut, base+"/api/users/1", keyA, fmt.Sprintf(`{"webhookUrl": "%shook"}`, sm.env["HERALD_SIM_WEBHOOK_URL"]), nil, http.StatusOK)

	send := func(key string) string {
		var ans struct{ Deliveries []delivery }
		status, b, err := tryJSON(context.Background(), http.MethodPost, base+"/api/notifications", key, "n-"+key[:12],
			`{"userId": 1, "template": "otp", "channels": ["WEBHOOK"], "priority": "HIGH", "payload": {"code": "123456"}}`)
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, status, "%s", b)
		require.NoError(t, json.Unmarshal(b, &ans))
		require.Len(t, ans.Deliveries, 1)
		return ans.Deliveries[0].ID
	}
	fromA, fromB := send(keyA), send(keyB)
	outcome := map[string]sim.Outcome{}
	heraldtest.WaitFor(t, 60*time.Second, "both webhooks at the simulator", func() bool {
		for _, r := range sm.records(t) {
			outcome[r.Key] = r.Outcome
		}
		return outcome[fromA] != "" && outcome[fromB] != ""
	})
	require.Equal(t, sim.Accepted, outcome[fromA], "A's webhook verifies with A's secret")
	require.Equal(t, sim.BadSignature, outcome[fromB], "B's webhook does not verify with A's secret")

	pool, err := pgxpool.New(context.Background(), st.dsn)
	require.NoError(t, err)
	defer pool.Close()
	statusIs := func(id, want string) func() bool {
		return func() bool {
			var status string
			err := pool.QueryRow(context.Background(), `SELECT status FROM delivery WHERE id = $1`, id).Scan(&status)
			return err == nil && status == want
		}
	}
	heraldtest.WaitFor(t, 30*time.Second, "A's delivery to be SENT", statusIs(fromA, "SENT"))
	heraldtest.WaitFor(t, 30*time.Second, "B's delivery to be FAILED (401 is permanent)", statusIs(fromB, "FAILED"))
}
