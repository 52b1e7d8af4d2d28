package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/senders/sim"
)

// The end-to-end tests run the real binary: `herald sim` and `herald serve` (ingest, relay,
// dispatch) as subprocesses on a fresh database, their own topics, replication slot,
// consumer groups and Redis prefix, and drive notifications through the HTTP API to every
// sender, then read the simulator's records.

// fastRecovery makes retries, sweeps and leases short enough for a test.
var fastRecovery = []string{
	"--retry-base", "100ms", "--retry-max", "1s", "--retry-max-attempts", "40",
	"--send-timeout", "4s", "--relay-sweep-interval", "250ms", "--relay-grace-period", "2s",
	"--relay-reap-interval", "1s", "--relay-sending-lease", "10s",
	"--relay-queued-lease-high", "15s", "--relay-queued-lease-normal", "15s", "--relay-queued-lease-low", "15s",
}

const otpTemplate = `{"category": "security", "channels": ["PUSH", "EMAIL", "SMS", "WEBHOOK"], "content": {
  "PUSH":    {"default": {"title": "Your code", "body": "Code {{.code}}"}},
  "EMAIL":   {"default": {"subject": "Your code {{.code}}", "text": "Your code is {{.code}}.",
                          "html": "<p>Your code is <b>{{.code}}</b>.</p>"}},
  "SMS":     {"default": {"text": "Your code is {{.code}}"}},
  "WEBHOOK": {"default": {"json": {"event": "otp", "code": "{{.code}}"}}}}}`

// providersOf maps a channel to the simulator providers a delivery of it reaches.
var providersOf = map[string][]string{
	"SMS": {sim.Twilio}, "EMAIL": {sim.SMTP}, "WEBHOOK": {sim.Webhook}, "PUSH": {sim.FCM, sim.APNs},
}

// served lists the simulator providers that serve a channel here (the standbys, Vonage and
// SendGrid, get no traffic while the primaries are configured first).
var served = []string{sim.FCM, sim.APNs, sim.Twilio, sim.Webhook, sim.SMTP}

// e2e is one running installation: stack, simulator, serve, API key, users.
type e2e struct {
	st   *stack
	sim  *simulator
	addr string
	key  string
	pool *pgxpool.Pool
	// first is the serve process newE2E started.
	first *proc
	// serveArgs are extra flags of every serve process.
	serveArgs []string
}

func newE2E(t *testing.T, users int, simArgs ...string) *e2e {
	t.Helper()
	return newE2EWith(t, users, nil, simArgs...)
}

// newE2EWith is newE2E with extra flags for herald serve.
func newE2EWith(t *testing.T, users int, serveArgs []string, simArgs ...string) *e2e {
	t.Helper()
	e := &e2e{st: newStack(t), serveArgs: serveArgs}
	// The simulator checks every webhook's signature with the secret of the test's client.
	var secret string
	e.key, secret = e.st.apiClient(t)
	e.sim = startSim(t, append(simArgs, "--sim-webhook-secret", secret)...)
	// herald's address is picked once the simulator holds its ports: picked before, the port
	// could be freed and handed to the simulator's listener, and herald serve could not bind it.
	e.addr = heraldtest.FreeAddr(t)
	pool, err := pgxpool.New(context.Background(), e.st.dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e.pool = pool
	e.first = e.serve(t, "serve")
	e.put(t, "/api/templates/otp", otpTemplate)
	for u := 1; u <= users; u++ {
		e.put(t, fmt.Sprintf("/api/users/%d", u), fmt.Sprintf(`{"email": "user%d@example.com", "phone": "+1555010%04d",
			"webhookUrl": "%su%d", "pushTokens": [{"token": "fcm-token-%d", "platform": "FCM"},
			{"token": "%064x", "platform": "APNS"}]}`, u, u, e.sim.env["HERALD_SIM_WEBHOOK_URL"], u, u, u))
	}
	return e
}

func (e *e2e) serve(t *testing.T, name string) *proc {
	return e.st.serve(t, name, e.addr, e.sim, append(slices.Clone(fastRecovery), e.serveArgs...)...)
}

func (e *e2e) put(t *testing.T, path, body string) {
	t.Helper()
	doJSON(t, http.MethodPut, "http://"+e.addr+path, e.key, body, nil, http.StatusOK, http.StatusCreated)
}

type delivery struct {
	ID      string `json:"id"`
	Channel string `json:"channel"`
}

// post accepts n notifications over channels, 8 requests at a time, and returns their
// deliveries.
func (e *e2e) post(t *testing.T, tag string, n, users int, channels ...string) []delivery {
	t.Helper()
	chs, _ := json.Marshal(channels)
	var (
		mu   sync.Mutex
		out  []delivery
		errs []error
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				prio := []string{"HIGH", "NORMAL"}[i%2]
				body := fmt.Sprintf(`{"userId": %d, "template": "otp", "channels": %s, "priority": %q,
					"payload": {"code": "%06d"}}`, 1+i%users, chs, prio, i)
				status, b, err := tryJSON(context.Background(), http.MethodPost, "http://"+e.addr+"/api/notifications",
					e.key, fmt.Sprintf("%s-%d", tag, i), body)
				var ans struct{ Deliveries []delivery }
				if err == nil && status != http.StatusAccepted {
					err = fmt.Errorf("POST notification %d: %d %s", i, status, b)
				}
				if err == nil {
					err = json.Unmarshal(b, &ans)
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				out = append(out, ans.Deliveries...)
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	require.Empty(t, errs)
	require.Len(t, out, n*len(channels), "every channel has a contact: no delivery may be suppressed")
	return out
}

// counts returns the number of deliveries per status.
func (e *e2e) counts(t *testing.T) map[string]int {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT status, count(*) FROM delivery GROUP BY status`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(t, rows.Scan(&s, &n))
		out[s] = n
	}
	require.NoError(t, rows.Err())
	return out
}

func final(c map[string]int) int { return c["SENT"] + c["FAILED"] + c["EXPIRED"] }

// waitAllFinal waits until every delivery is SENT, FAILED or EXPIRED.
func (e *e2e) waitAllFinal(t *testing.T, total int, d time.Duration) map[string]int {
	t.Helper()
	var c map[string]int
	heraldtest.WaitFor(t, d, fmt.Sprintf("%d deliveries to end", total), func() bool {
		c = e.counts(t)
		return final(c) == total
	})
	return c
}

// delivered counts the simulator's delivered requests per provider and key.
func delivered(recs []sim.Record) map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, r := range recs {
		if !r.Outcome.Delivered() {
			continue
		}
		if out[r.Provider] == nil {
			out[r.Provider] = map[string]int{}
		}
		out[r.Provider][r.Key]++
	}
	return out
}

// TestEndToEndEverySenderThroughAnOutage sends OTPs over every channel through ingest →
// relay → Kafka → dispatch → Twilio, SMTP, FCM, APNs and webhook at the simulator: first
// healthy, then through an outage of every provider (503 with Retry-After) that ends. Every
// delivery must end SENT, each reaching its provider exactly once with its delivery id as
// the idempotency key.
func TestEndToEndEverySenderThroughAnOutage(t *testing.T) {
	t.Parallel()
	const users, perPhase = 4, 12
	all := []string{"PUSH", "EMAIL", "SMS", "WEBHOOK"}
	e := newE2E(t, users)

	healthy := e.post(t, "healthy", perPhase, users, all...)
	e.waitAllFinal(t, len(healthy), 60*time.Second)
	require.Equal(t, map[string]int{"SENT": len(healthy)}, e.counts(t))
	recs := e.sim.records(t)
	got := delivered(recs)
	for _, d := range healthy {
		for _, p := range providersOf[d.Channel] {
			require.Equal(t, 1, got[p][d.ID], "%s delivery %s at %s", d.Channel, d.ID, p)
		}
	}
	requireOneTrace(t, e, recs, healthy)

	// The outage: every provider answers 503 until every new delivery has been refused twice
	// (two failed attempts in its log, whatever pace its own retries took; Twilio's 503 is
	// ambiguous, as it takes no idempotency key; the others' is transient); then it heals.
	for _, p := range served {
		e.sim.setFaults(t, p, `{"unavailable": 1, "retryAfter": "300ms"}`)
	}
	outage := e.post(t, "outage", perPhase, users, all...)
	heraldtest.WaitFor(t, 60*time.Second, "two refusals of every outage delivery", func() bool {
		var refusedTwice int
		require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM (
			SELECT delivery_id FROM delivery_attempt WHERE delivery_id = ANY($1) AND outcome IN ('TRANSIENT', 'AMBIGUOUS')
			GROUP BY delivery_id HAVING count(*) >= 2) d`, ids(outage)).Scan(&refusedTwice))
		return refusedTwice == len(outage)
	})
	require.Zero(t, e.counts(t)["SENT"]-len(healthy), "nothing is sent during the outage")
	for _, p := range served {
		e.sim.setFaults(t, p, `{}`)
	}
	c := e.waitAllFinal(t, len(healthy)+len(outage), 60*time.Second)
	require.Equal(t, map[string]int{"SENT": len(healthy) + len(outage)}, c)

	got = delivered(e.sim.records(t))
	for _, d := range outage {
		var n int
		for _, p := range providersOf[d.Channel] {
			require.LessOrEqual(t, got[p][d.ID], 1, "%s delivery %s delivered twice at %s", d.Channel, d.ID, p)
			n += got[p][d.ID]
		}
		// A PUSH delivery is sent when any device took it: one platform healed a moment
		// before the other may have taken it alone.
		require.GreaterOrEqual(t, n, 1, "%s delivery %s never reached its provider", d.Channel, d.ID)
	}
	var attempts int
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT min(attempts) FROM delivery WHERE id = ANY($1)`, ids(outage)).Scan(&attempts))
	require.GreaterOrEqual(t, attempts, 3, "every outage delivery was refused twice before it was sent")
	for p, s := range e.sim.stats(t) {
		require.Zero(t, s.Duplicates, "duplicates at %s", p)
	}
}

// requireOneTrace checks that every HTTP provider call of deliveries carried the trace that
// ingest started for its notification: one trace from the API call to the provider.
func requireOneTrace(t *testing.T, e *e2e, recs []sim.Record, deliveries []delivery) {
	t.Helper()
	stored := map[string]string{}
	rows, err := e.pool.Query(context.Background(), `SELECT id::text, traceparent FROM delivery WHERE id = ANY($1)`, ids(deliveries))
	require.NoError(t, err)
	for rows.Next() {
		var id, tp string
		require.NoError(t, rows.Scan(&id, &tp))
		stored[id] = traceID(tp)
	}
	require.NoError(t, rows.Err())
	checked := 0
	for _, r := range recs {
		want, ok := stored[r.Key]
		if !ok || r.Provider == sim.SMTP {
			continue // another phase's delivery, or SMTP, which has no trace header
		}
		require.NotEmpty(t, want, "delivery %s has no stored traceparent", r.Key)
		require.Equal(t, want, traceID(r.Traceparent), "%s call of delivery %s is not in its notification's trace", r.Provider, r.Key)
		checked++
	}
	require.Positive(t, checked)
}

// traceID returns the trace-id field of a W3C traceparent.
func traceID(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 {
		return ""
	}
	return parts[1]
}

func ids(ds []delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// TestEndToEndKilledServe kill -9s `herald serve` while a few hundred notifications are in
// flight and starts it again: every accepted delivery must end SENT (or FAILED/EXPIRED with
// its cause), and every SENT one must have reached its provider. The kill may cost
// duplicates (a provider call that finished just before the kill is retried as ambiguous);
// their number is logged.
func TestEndToEndKilledServe(t *testing.T) {
	t.Parallel()
	const users, n = 10, 300
	// Provider rate limits bound how fast the 600 deliveries can drain (at most about 80 a
	// second over both channels, whatever the machine's speed), so the kill finds most of
	// them still to send. A rate-limited delivery may wait in its lane, so the SENDING lease
	// must cover that wait too.
	e := newE2EWith(t, users, []string{"--rate-limits", "sms:twilio=40,webhook=40", "--relay-sending-lease", "20s"},
		"--sim-latency", "all.min=20ms,all.median=60ms,all.p99=300ms")
	first := e.first

	ds := e.post(t, "kill", n, users, "SMS", "WEBHOOK")
	heraldtest.WaitFor(t, 60*time.Second, "some deliveries sent before the kill", func() bool {
		return e.counts(t)["SENT"] >= len(ds)/5
	})
	first.kill()
	atKill := e.counts(t)
	t.Logf("killed serve with %d of %d deliveries sent: %v", atKill["SENT"], len(ds), atKill)
	require.Less(t, final(atKill), len(ds), "the kill must hit deliveries in flight")

	e.serve(t, "serve-restarted")
	c := e.waitAllFinal(t, len(ds), 90*time.Second)
	t.Logf("after restart: %v", c)

	rows, err := e.pool.Query(context.Background(), `SELECT id, channel, status, coalesce(last_error, '') FROM delivery`)
	require.NoError(t, err)
	got := delivered(e.sim.records(t))
	var sent int
	for rows.Next() {
		var id, ch, status, cause string
		require.NoError(t, rows.Scan(&id, &ch, &status, &cause))
		switch status {
		case "SENT":
			sent++
			require.GreaterOrEqual(t, got[providersOf[ch][0]][id], 1, "SENT %s delivery %s never reached its provider", ch, id)
		case "FAILED", "EXPIRED":
			require.NotEmpty(t, cause, "%s delivery %s ended %s without a cause", ch, id, status)
		default:
			t.Fatalf("delivery %s ended %s", id, status)
		}
	}
	require.NoError(t, rows.Err())
	rows.Close()
	var dups int64
	var byProvider []string
	for p, s := range e.sim.stats(t) {
		dups += s.Duplicates
		byProvider = append(byProvider, fmt.Sprintf("%s=%d", p, s.Duplicates))
	}
	t.Logf("kill -9 of serve: %d of %d deliveries SENT; duplicate provider calls caused by the kill: %d (%s)",
		sent, len(ds), dups, strings.Join(byProvider, " "))
	require.Greater(t, sent, len(ds)*9/10, "almost every delivery is sent")
}
