package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/heraldtest"
)

// The environment variables `deploy/local/stack.sh env` prints for Jaeger: its OTLP/HTTP
// receiver and its query API.
const (
	envJaegerOTLP  = "HERALD_TEST_JAEGER_OTLP_ENDPOINT"
	envJaegerQuery = "HERALD_TEST_JAEGER_QUERY_URL"
)

// jaeger starts the stack's Jaeger when it is not running (`stack.sh up jaeger` returns at
// once when it is; `make test` starts it before the tests, so that its one-time build does
// not count against a test timeout) and returns its OTLP endpoint and query URL.
func jaeger(t *testing.T) (otlp, query string) {
	t.Helper()
	otlp, query = os.Getenv(envJaegerOTLP), os.Getenv(envJaegerQuery)
	require.NotEmpty(t, otlp, "%s is not set: eval \"$(deploy/local/stack.sh env)\"", envJaegerOTLP)
	require.NotEmpty(t, query, "%s is not set: eval \"$(deploy/local/stack.sh env)\"", envJaegerQuery)
	script, err := filepath.Abs("../../deploy/local/stack.sh")
	require.NoError(t, err)
	out, err := exec.Command(script, "up", "jaeger").CombinedOutput()
	require.NoError(t, err, "deploy/local/stack.sh up jaeger: %s", out)
	return otlp, query
}

// providerSpan is the name of otelhttp's client span of the Twilio sender's call: its
// provider account, then the method.
const providerSpan = "sms:twilio POST"

// jaegerSpan is a span as Jaeger's query API (/api/traces/{id}) returns it.
type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// chainToRoot reports whether every span from sp up to the trace's root is in spans.
func chainToRoot(spans map[string][]jaegerSpan, sp jaegerSpan) bool {
	byID := map[string]jaegerSpan{}
	for _, list := range spans {
		for _, s := range list {
			byID[s.SpanID] = s
		}
	}
	for sp.parent() != "" {
		p, ok := byID[sp.parent()]
		if !ok {
			return false
		}
		sp = p
	}
	return true
}

func (s jaegerSpan) tag(key string) string {
	for _, tg := range s.Tags {
		if tg.Key == key {
			return fmt.Sprint(tg.Value)
		}
	}
	return ""
}

// jaegerTrace fetches a trace's spans by operation name; ok=false while Jaeger has none.
func jaegerTrace(ctx context.Context, query, traceID string) (map[string][]jaegerSpan, error) {
	status, b, err := tryJSON(ctx, http.MethodGet, query+"/api/traces/"+traceID, "", "", "")
	if err != nil || status == http.StatusNotFound {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /api/traces/%s: %d %s", traceID, status, b)
	}
	var ans struct {
		Data []struct {
			Spans []jaegerSpan `json:"spans"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return nil, fmt.Errorf("decode trace %s: %w", traceID, err)
	}
	byName := map[string][]jaegerSpan{}
	for _, d := range ans.Data {
		for _, s := range d.Spans {
			byName[s.OperationName] = append(byName[s.OperationName], s)
		}
	}
	return byName, nil
}

// oneOTP is one HIGH OTP by SMS sent through the real pipeline: `herald serve` and the
// provider simulator as subprocesses, serve with env on top of the simulator's settings.
type oneOTP struct {
	addr       string // serve's API listener
	admin      string // serve's admin listener (/metrics)
	deliveryID string
	traceID    string // of the notification's stored traceparent
}

// sendOneOTP starts serve with env, sends one OTP and waits until its delivery is SENT.
func sendOneOTP(t *testing.T, env map[string]string) oneOTP {
	t.Helper()
	st := newStack(t)
	key, secret := st.apiClient(t)
	sm := startSim(t, "--sim-webhook-secret", secret)
	withEnv := &simulator{proc: sm.proc, url: sm.url, env: maps.Clone(sm.env)}
	maps.Copy(withEnv.env, env)
	addr, admin := heraldtest.FreeAddr(t), heraldtest.FreeAddr(t)
	st.serve(t, "serve", addr, withEnv, append([]string{"--admin-addr", admin}, fastRecovery...)...)
	pool, err := pgxpool.New(context.Background(), st.dsn)
	require.NoError(t, err)
	defer pool.Close()
	// Ready serve may not stream yet: a row committed before the relay's slot exists reaches
	// Kafka through the sweeper, without the commit LSN the trace test looks for.
	slot := st.args[slices.Index(st.args, "--relay-slot")+1]
	// The slot exists once its creation (which waits for running transactions) is complete.
	heraldtest.WaitFor(t, 90*time.Second, "the relay to stream from slot "+slot, func() bool {
		var active bool
		err := pool.QueryRow(context.Background(), `SELECT active FROM pg_replication_slots
			WHERE slot_name = $1 AND confirmed_flush_lsn IS NOT NULL`, slot).Scan(&active)
		return err == nil && active
	})
	base := "http://" + addr
	doJSON(t, http.MethodPut, base+"/api/templates/otp", key, otpTemplate, nil, http.StatusOK, http.StatusCreated)
	doJSON(t, http.MethodPut, base+"/api/users/7", key, `{"phone": "+15550100007"}`, nil, http.StatusOK, http.StatusCreated)

	var ans struct {
		Deliveries []delivery `json:"deliveries"`
	}
	status, b, err := tryJSON(context.Background(), http.MethodPost, base+"/api/notifications", key, "one-otp",
		`{"userId": 7, "template": "otp", "channels": ["SMS"], "priority": "HIGH", "payload": {"code": "424242"}}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status, "%s", b)
	require.NoError(t, json.Unmarshal(b, &ans))
	require.Len(t, ans.Deliveries, 1)
	o := oneOTP{addr: addr, admin: admin, deliveryID: ans.Deliveries[0].ID}

	var tp, state string
	defer func() {
		if t.Failed() {
			t.Logf("delivery %s: status %s", o.deliveryID, state)
		}
	}()
	heraldtest.WaitFor(t, 30*time.Second, "the delivery to be SENT", func() bool {
		err := pool.QueryRow(context.Background(), `SELECT status, traceparent FROM delivery WHERE id = $1`, o.deliveryID).Scan(&state, &tp)
		require.NoError(t, err)
		return state == "SENT"
	})
	o.traceID = traceID(tp)
	require.Len(t, o.traceID, 32, "stored traceparent %q", tp)
	return o
}

// TestJaegerOneTraceFromAPIToProvider sends one HIGH OTP by SMS through the real pipeline
// with traces exported over OTLP to the stack's Jaeger, and reads the notification's trace
// back from Jaeger's query API: one trace, from the API request to the provider's HTTP call,
// with the parent links docs/operations.md ("What herald promises an operator") lists.
func TestJaegerOneTraceFromAPIToProvider(t *testing.T) {
	otlp, query := jaeger(t)
	o := sendOneOTP(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": otlp,
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_SERVICE_NAME":           "herald-jaeger-test",
		"OTEL_BSP_SCHEDULE_DELAY":     "100", // ms: export at once rather than every 5 s
	})
	traceID, deliveryID := o.traceID, o.deliveryID

	// Spans arrive in batches from the API, relay and dispatch: wait for the last one.
	want := []string{"POST /api/notifications", "ingest.accept", "cdc publish", "dispatch.deliver",
		"dispatch.lease", "dispatch.rate_limit", "dispatch.send", providerSpan}
	var (
		spans map[string][]jaegerSpan
		err   error
	)
	heraldtest.WaitFor(t, 30*time.Second, "Jaeger to hold every span of trace "+traceID, func() bool {
		spans, err = jaegerTrace(context.Background(), query, traceID)
		require.NoError(t, err)
		for _, name := range want {
			if len(spans[name]) == 0 {
				return false
			}
		}
		// A stale record's dispatch.deliver (the second of the two publishes) may arrive
		// before the one above the provider call, which ends last: wait for that chain too.
		return chainToRoot(spans, spans[providerSpan][0])
	})
	// The chain is walked from the one provider call up, parent by parent: a duplicate
	// record (a sweeper's publish, a redelivery) may add spans that end early, but only one
	// chain reaches the provider.
	byID := map[string]jaegerSpan{}
	for _, list := range spans {
		for _, sp := range list {
			require.Equal(t, traceID, sp.TraceID)
			byID[sp.SpanID] = sp
		}
	}
	parentOf := func(child jaegerSpan, name string) jaegerSpan {
		p, ok := byID[child.parent()]
		require.True(t, ok, "%s has no parent span in the trace (want %s)", child.OperationName, name)
		require.Equal(t, name, p.OperationName, "parent of %s", child.OperationName)
		return p
	}
	childOf := func(parent jaegerSpan, name string) jaegerSpan {
		var found []jaegerSpan
		for _, sp := range spans[name] {
			if sp.parent() == parent.SpanID {
				found = append(found, sp)
			}
		}
		require.Len(t, found, 1, "%s spans under %s", name, parent.OperationName)
		return found[0]
	}
	require.Len(t, spans[providerSpan], 1, "one provider call")
	provider := spans[providerSpan][0]
	send := parentOf(provider, "dispatch.send")
	deliver := parentOf(send, "dispatch.deliver")
	childOf(deliver, "dispatch.lease")
	childOf(deliver, "dispatch.rate_limit")
	// The record the worker took: the accepting process's, published right after the commit,
	// or the relay's from the WAL (both are made; the first to be consumed claims the row).
	publish, ok := byID[deliver.parent()]
	require.True(t, ok, "dispatch.deliver has no parent span in the trace")
	require.Contains(t, []string{"ingest publish", "cdc publish"}, publish.OperationName, "parent of dispatch.deliver")
	// The stored traceparent is the request span's: the accept transaction and both
	// publishes are its children.
	server := parentOf(publish, "POST /api/notifications")
	childOf(server, "ingest.accept")
	require.Empty(t, server.parent(), "the API request's span is the root")

	// The relay published the row from the WAL as well: its span names the commit LSN.
	relayPub := childOf(server, "cdc publish")
	require.NotEmpty(t, relayPub.tag("herald.commit_lsn"), "the relay's publish span names the commit LSN")
	require.Equal(t, "stream", relayPub.tag("herald.source"))
	require.Equal(t, deliveryID, relayPub.tag("herald.delivery_id"))
	require.Equal(t, deliveryID, publish.tag("herald.delivery_id"))
	require.Equal(t, deliveryID, deliver.tag("herald.delivery_id"))
	require.Equal(t, "201", provider.tag("http.response.status_code"), "Twilio answers 201 Created")
}
