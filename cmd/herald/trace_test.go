package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/apikey"
	transition "github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
)

const traceTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"

// retriedNotification inserts a notification of client with idempotency key key and one
// SMS delivery, and drives the delivery through the real transitions: QUEUED, SENDING,
// PENDING (TRANSIENT 503, retry due at once), SENDING, SENT. It returns the notification
// and delivery ids.
func retriedNotification(t *testing.T, pool *pgxpool.Pool, client, key string) (nid, did string) {
	t.Helper()
	ctx := context.Background()
	n, d := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	ok, err := transition.Insert(ctx, pool, transition.Notification{ID: n, ClientID: client, IdempotencyKey: key,
		RequestHash: []byte{1}, UserID: 7, Template: "otp", Category: "security", Priority: herald.PriorityHigh,
		Traceparent: "00-" + traceTraceID + "-00f067aa0ba902b7-01", Response: []byte(`{}`),
		Deliveries: []transition.New{{ID: d, Channel: herald.ChannelSMS}}})
	require.NoError(t, err)
	require.True(t, ok)
	id := d.String()
	marked, err := transition.MarkQueued(ctx, pool, []transition.Version{deliverytest.Version(t, pool, id)})
	require.NoError(t, err)
	require.Contains(t, marked, id)
	for i, o := range []transition.Outcome{
		{Status: herald.StatusPending, AttemptClass: "TRANSIENT", Error: "unavailable", Provider: "sim-sms", ProviderCode: "503"},
		{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sim-sms", ProviderID: "sim-1001", ProviderCode: "200"},
	} {
		att, started, ok, err := transition.Claim(ctx, pool, id, i)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = transition.Record(ctx, pool, id, att, started, o)
		require.NoError(t, err)
		require.True(t, ok)
	}
	return n.String(), id
}

var stepLine = regexp.MustCompile(`(?m)^\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\s+\+\S+\s+([A-Z]+)\s+(.*?)\s*$`)

// TestTraceCLI: herald trace finds one notification by its id, by a delivery id and by an
// idempotency key with --client (id or name), prints every step with its gap and the
// attempt log, links the trace in Jaeger with --jaeger-url or HERALD_JAEGER_URL, and
// prints the same timeline as JSON with --json. An unknown id, and a key without its client,
// fail.
func TestTraceCLI(t *testing.T) {
	dsn := stacktest.PostgresURL(t)
	db := []string{"--database-url", dsn}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	client, err := apikey.CreateAPIClient(ctx, pool, "shop", apikey.DefaultScopes())
	require.NoError(t, err)
	nid, did := retriedNotification(t, pool, client.ID, "order-1234-shipped")

	for name, ref := range map[string][]string{
		"notification id":          {nid},
		"delivery id":              {did},
		"idempotency key, id":      {"--client", client.ID, "order-1234-shipped"},
		"idempotency key, by name": {"order-1234-shipped", "--client", "shop"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := runHerald(t, append(append([]string{"trace"}, ref...), append(db, "--jaeger-url", "http://127.0.0.1:16686/")...)...)
			require.NoError(t, err, out)
			require.Contains(t, out, "notification  "+nid)
			require.Contains(t, out, "trace         "+traceTraceID)
			require.Contains(t, out, "jaeger        http://127.0.0.1:16686/trace/"+traceTraceID)
			require.Contains(t, out, "delivery "+did+"  SMS  SENT  attempts 2  provider sim-sms  message sim-1001")
			var steps []string
			for _, m := range stepLine.FindAllStringSubmatch(out, -1) {
				steps = append(steps, m[1]+" "+m[2])
			}
			require.Equal(t, []string{"PENDING accepted", "QUEUED published", "SENDING attempt 1",
				"PENDING attempt 1 ERROR TRANSIENT (503), retry", "SENDING attempt 2", "SENT attempt 2 SENT (200)"}, steps, out)
			require.Regexp(t, `(?m)^\s+1\s+\S+Z\s+\S+\s+ERROR\s+TRANSIENT\s+sim-sms\s+503\s+\S+Z$`, out)
			require.Regexp(t, `(?m)^\s+2\s+\S+Z\s+\S+\s+SENT\s+-\s+sim-sms\s+200\s+-$`, out)
			require.NotContains(t, out, "unavailable", "error texts stay out of the timeline")
		})
	}

	t.Run("json", func(t *testing.T) {
		out, err := runHeraldEnv(t, []string{"HERALD_JAEGER_URL=http://jaeger:16686"}, append([]string{"trace", "--json", did}, db...)...)
		require.NoError(t, err, out)
		var got struct {
			NotificationID string `json:"notificationId"`
			TraceID        string `json:"traceId"`
			JaegerURL      string `json:"jaegerUrl"`
			Priority       string `json:"priority"`
			Deliveries     []struct {
				ID, Status, Provider, ProviderMessageID string
				Attempts                                int
				Steps                                   []struct {
					Status  string `json:"status"`
					At      string `json:"at"`
					SinceNs int64  `json:"sinceNs"`
					Note    string `json:"note"`
				} `json:"steps"`
				AttemptLog []map[string]any `json:"attemptLog"`
			} `json:"deliveries"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &got), out)
		require.Equal(t, nid, got.NotificationID)
		require.Equal(t, traceTraceID, got.TraceID)
		require.Equal(t, "http://jaeger:16686/trace/"+traceTraceID, got.JaegerURL)
		require.Equal(t, "HIGH", got.Priority)
		require.Len(t, got.Deliveries, 1)
		d := got.Deliveries[0]
		require.Equal(t, did, d.ID)
		require.Equal(t, "SENT", d.Status)
		require.Equal(t, "sim-1001", d.ProviderMessageID)
		var statuses []string
		for _, s := range d.Steps {
			statuses = append(statuses, s.Status)
			require.GreaterOrEqual(t, s.SinceNs, int64(0))
			require.NotEmpty(t, s.At)
		}
		require.Equal(t, []string{"PENDING", "QUEUED", "SENDING", "PENDING", "SENDING", "SENT"}, statuses)
		require.Len(t, d.AttemptLog, 2)
		require.Equal(t, "ERROR", d.AttemptLog[0]["outcome"])
		require.Equal(t, "TRANSIENT", d.AttemptLog[0]["errorClass"])
		require.NotNil(t, d.AttemptLog[0]["nextAttemptAt"])
		require.Equal(t, "SENT", d.AttemptLog[1]["outcome"])
	})

	t.Run("not found", func(t *testing.T) {
		out, err := runHerald(t, append([]string{"trace", uuid.Must(uuid.NewV7()).String()}, db...)...)
		require.Error(t, err)
		require.Contains(t, out, "no such notification")
		out, err = runHerald(t, append([]string{"trace", "order-1234-shipped"}, db...)...)
		require.Error(t, err)
		require.Contains(t, out, "needs its client")
		out, err = runHerald(t, append([]string{"trace", "--client", "other", "order-1234-shipped"}, db...)...)
		require.Error(t, err)
		require.Contains(t, out, "no such notification")
		require.False(t, strings.Contains(out, dsn), "no connection string in errors")
	})
}
