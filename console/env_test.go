package console_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/console"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// Personal data the fixtures store, which no console page may show.
const (
	piiPhone   = "+15557654321"
	piiEmail   = "ada.lovelace@example.com"
	piiPayload = "PAYLOAD-SECRET-8812"
	piiToken   = "fcm-token-SECRET-7731"
	traceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
)

// env is a console on a fresh database, with Jaeger's query API faked (trace traceID only), an operator key, a key without the operator
// scope, and a few deliveries: one SMS that went QUEUED → SENDING → PENDING (retry) →
// SENDING → SENT, and PENDING EMAIL and PUSH deliveries of other users.
type env struct {
	t           *testing.T
	pool        *pgxpool.Pool
	srv         *httptest.Server
	jaeger      *fakeJaeger
	operatorKey string
	readerKey   string
	sent        string // the retried-then-sent SMS delivery
	pending     []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	pool := stacktest.Postgres(t)
	op, err := apikey.CreateAPIClient(ctx, pool, "ops", []apikey.Scope{apikey.ScopeOperator})
	require.NoError(t, err)
	reader, err := apikey.CreateAPIClient(ctx, pool, "reader", apikey.AllScopes()[:6]) // every scope but operator
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO user_contact (user_id, email, phone) VALUES (7, $1, $2)`, piiEmail, piiPhone)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO push_token (user_id, token, platform) VALUES (7, $1, 'FCM')`, piiToken)
	require.NoError(t, err)

	client := deliverytest.Client(t, pool)
	spec := deliverytest.Spec{ClientID: client, UserID: 7, Template: "otp", Priority: herald.PriorityHigh,
		Payload:     `{"code":"` + piiPayload + `"}`,
		Recipient:   `{"phone":"` + piiPhone + `","email":"` + piiEmail + `","pushTokens":[{"token":"` + piiToken + `","platform":"FCM"}]}`,
		Traceparent: "00-" + traceID + "-00f067aa0ba902b7-01"}
	e := &env{t: t, pool: pool, operatorKey: op.Key, readerKey: reader.Key, jaeger: newFakeJaeger(t)}
	e.sent = deliverytest.One(t, pool, spec)
	retriedThenSent(t, pool, e.sent)
	e.pending = append(e.pending,
		deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, UserID: 8, Template: "welcome", Channel: herald.ChannelEmail, Payload: spec.Payload}),
		deliverytest.One(t, pool, deliverytest.Spec{ClientID: client, UserID: 9, Template: "promo", Channel: herald.ChannelPush, Priority: herald.PriorityLow}))

	e.serve(console.Config{JaegerURL: e.jaeger.srv.URL, RateLimits: map[string]int{"sim-sms": 50}})
	return e
}

// serve starts a console with cfg on the env's database, in place of the one before.
func (e *env) serve(cfg console.Config) {
	e.t.Helper()
	con, err := console.New(cfg, e.pool, nil, zaptest.NewLogger(e.t))
	require.NoError(e.t, err)
	if e.srv != nil {
		e.srv.Close()
	}
	e.srv = httptest.NewServer(con.Handler())
	e.t.Cleanup(e.srv.Close)
}

// retriedThenSent drives delivery id through the real transitions: QUEUED, SENDING,
// PENDING (a TRANSIENT 503, due at once), SENDING, SENT.
func retriedThenSent(t *testing.T, pool *pgxpool.Pool, id string) {
	t.Helper()
	ctx := context.Background()
	marked, err := delivery.MarkQueued(ctx, pool, []delivery.Version{deliverytest.Version(t, pool, id)})
	require.NoError(t, err)
	require.Contains(t, marked, id)
	for i, o := range []delivery.Outcome{
		{Status: herald.StatusPending, AttemptClass: "TRANSIENT", Error: "unavailable for " + piiPhone, Provider: "sim-sms", ProviderCode: "503"},
		{Status: herald.StatusSent, AttemptClass: "SENT", Provider: "sim-sms", ProviderID: "sim-1001", ProviderCode: "200"},
	} {
		att, started, ok, err := delivery.Claim(ctx, pool, id, i)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = delivery.Record(ctx, pool, id, att, started, o)
		require.NoError(t, err)
		require.True(t, ok)
	}
}

// client is an HTTP client with a cookie jar that does not follow redirects.
func (e *env) client() *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(e.t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// notificationOf returns the notification id of delivery id.
func (e *env) notificationOf(id string) string {
	var nid string
	require.NoError(e.t, e.pool.QueryRow(context.Background(), `SELECT notification_id::text FROM delivery WHERE id = $1`, id).Scan(&nid))
	return nid
}
