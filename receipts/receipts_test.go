package receipts_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/openapitest"
	"github.com/heraldhq/herald/internal/stacktest"
	"github.com/heraldhq/herald/receipts"
	"github.com/heraldhq/herald/senders/sendgrid"
	"github.com/heraldhq/herald/senders/twilio"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	twilioToken  = "twilio-auth-token"
	vonageSecret = "vonage-signature-secret"
)

// env is a Receiver on a real database behind an HTTP server at a public URL.
type env struct {
	pool   *pgxpool.Pool
	url    string
	sgKey  *ecdsa.PrivateKey
	client string
	rx     *receipts.Receiver
}

func newEnv(t *testing.T, hold time.Duration) *env {
	t.Helper()
	pool := stacktest.Postgres(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	mux := http.NewServeMux()
	// Every receipt request and answer is checked against docs/openapi.yaml.
	srv := httptest.NewServer(openapitest.Handler(t, mux))
	t.Cleanup(srv.Close)
	rx, err := receipts.New(receipts.Config{PublicURL: srv.URL + "/", TwilioAuthToken: twilioToken,
		VonageSignatureSecret: vonageSecret, SendGridPublicKey: &key.PublicKey, Hold: hold, SweepInterval: 50 * time.Millisecond},
		pool, zap.NewNop())
	require.NoError(t, err)
	for _, rt := range rx.Routes() {
		mux.Handle(rt.Method+" "+rt.Path, rt.Handler)
	}
	return &env{pool: pool, url: srv.URL, sgKey: key, client: deliverytest.Client(t, pool), rx: rx}
}

func (e *env) delivery(t *testing.T, st herald.Status) string {
	return deliverytest.One(t, e.pool, deliverytest.Spec{ClientID: e.client, Status: st, Attempts: 1})
}

// state is a delivery's status, its receipt log and its last write.
func (e *env) state(t *testing.T, id string) string {
	t.Helper()
	var s string
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT status || ' ' || coalesce(receipts::text, '[]') || ' ' || updated_at::text FROM delivery WHERE id = $1`, id).Scan(&s))
	return s
}

func (e *env) status(t *testing.T, id string) herald.Status {
	t.Helper()
	var s herald.Status
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT status FROM delivery WHERE id = $1`, id).Scan(&s))
	return s
}

func (e *env) held(t *testing.T, id string) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM receipt_hold WHERE delivery_id = $1`, id).Scan(&n))
	return n
}

func post(t *testing.T, req *http.Request) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusForbidden {
		var p map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
		require.Equal(t, "bad_signature", p["code"])
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode
}

// signing says how a test request is signed.
type signing int

const (
	signed signing = iota
	forged         // signed with another secret
	unsigned
)

// provider sends one receipt of a provider: id, the provider's status word, signed or not.
type provider struct {
	name      string
	delivered string // the provider's word for delivered
	failed    string // and for undelivered
	step      string // a step on the way
	send      func(t *testing.T, e *env, id, status string, s signing) int
}

var providers = []provider{
	{"twilio", "delivered", "undelivered", "sent", sendTwilio},
	{"vonage", "delivered", "failed", "accepted", sendVonage},
	{"sendgrid", "delivered", "bounce", "processed", sendSendGrid},
}

func sendTwilio(t *testing.T, e *env, id, status string, s signing) int {
	cb := twilio.StatusCallback(e.url+receipts.TwilioPath, id)
	form := url.Values{"MessageSid": {"SM1"}, "MessageStatus": {status}, "AccountSid": {"ACtest"}, "To": {"+447700900123"}}
	if status == "undelivered" {
		form.Set("ErrorCode", "30005")
	}
	req, err := http.NewRequest(http.MethodPost, cb, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	switch s {
	case signed:
		req.Header.Set(receipts.TwilioSignatureHeader, receipts.TwilioSign(twilioToken, cb, form))
	case forged:
		req.Header.Set(receipts.TwilioSignatureHeader, receipts.TwilioSign("another-token", cb, form))
	}
	return post(t, req)
}

func sendVonage(t *testing.T, e *env, id, status string, s signing) int {
	p := map[string]string{"messageId": "0A0000001", "msisdn": "447700900123", "to": "Herald", "status": status,
		"err-code": "0", "client-ref": id, "message-timestamp": time.Now().UTC().Format(time.DateTime),
		"timestamp": strconv.FormatInt(time.Now().Unix(), 10)}
	switch s {
	case signed:
		p["sig"] = receipts.VonageSign(vonageSecret, p)
	case forged:
		p["sig"] = receipts.VonageSign("another-secret", p)
	}
	q := url.Values{}
	for k, v := range p {
		q.Set(k, v)
	}
	req, err := http.NewRequest(http.MethodGet, e.url+receipts.VonagePath+"?"+q.Encode(), nil)
	require.NoError(t, err)
	return post(t, req)
}

func sendSendGrid(t *testing.T, e *env, id, status string, s signing) int {
	body, err := json.Marshal([]map[string]any{{"email": "ada@example.com", "event": status, "timestamp": time.Now().Unix(),
		"sg_message_id": "sg1.filter", sendgrid.DeliveryIDArg: id}})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, e.url+receipts.SendGridPath, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	key := e.sgKey
	if s == forged {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
	}
	if s != unsigned {
		sig, err := receipts.SendGridSign(key, ts, body)
		require.NoError(t, err)
		req.Header.Set("X-Twilio-Email-Event-Webhook-Signature", sig)
		req.Header.Set("X-Twilio-Email-Event-Webhook-Timestamp", ts)
	}
	return post(t, req)
}

// TestReceiptsPerProvider: for each provider, a forged and an unsigned receipt are 403 and
// change nothing; a signed step on the way is logged; a signed final receipt moves SENT to
// DELIVERED (or UNDELIVERED); the same again changes nothing; a late contrary one is only
// logged; a receipt of an unknown id is 200 and held.
func TestReceiptsPerProvider(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Minute)
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			id := e.delivery(t, herald.StatusSent)
			before := e.state(t, id)
			require.Equal(t, http.StatusForbidden, p.send(t, e, id, p.delivered, forged))
			require.Equal(t, http.StatusForbidden, p.send(t, e, id, p.delivered, unsigned))
			require.Equal(t, before, e.state(t, id), "a bad signature changes nothing")
			require.Zero(t, e.held(t, id))

			require.Equal(t, http.StatusOK, p.send(t, e, id, p.step, signed))
			require.Equal(t, herald.StatusSent, e.status(t, id))
			require.Equal(t, http.StatusOK, p.send(t, e, id, p.delivered, signed))
			require.Equal(t, herald.StatusDelivered, e.status(t, id))
			after := e.state(t, id)
			require.Equal(t, http.StatusOK, p.send(t, e, id, p.delivered, signed))
			require.Equal(t, after, e.state(t, id), "a duplicate changes nothing")
			require.Equal(t, http.StatusOK, p.send(t, e, id, p.failed, signed))
			require.Equal(t, herald.StatusDelivered, e.status(t, id), "nothing moves back")

			bounced := e.delivery(t, herald.StatusSent)
			require.Equal(t, http.StatusOK, p.send(t, e, bounced, p.failed, signed))
			require.Equal(t, herald.StatusUndelivered, e.status(t, bounced))

			unknown := uuid.Must(uuid.NewV7()).String()
			require.Equal(t, http.StatusOK, p.send(t, e, unknown, p.delivered, signed))
			require.Equal(t, 1, e.held(t, unknown), "an unknown id is held")
		})
	}
}

// TestReceiptOverOneMiB: a receipt request over 1 MiB is 413 body_too_large and changes
// nothing, whatever its signature.
func TestReceiptOverOneMiB(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Minute)
	id := e.delivery(t, herald.StatusSent)
	before := e.state(t, id)
	body, err := json.Marshal([]map[string]any{{"event": "delivered", sendgrid.DeliveryIDArg: id,
		"padding": strings.Repeat("x", 1<<20)}})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, e.url+receipts.SendGridPath, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	sig, err := receipts.SendGridSign(e.sgKey, ts, body)
	require.NoError(t, err)
	req.Header.Set("X-Twilio-Email-Event-Webhook-Signature", sig)
	req.Header.Set("X-Twilio-Email-Event-Webhook-Timestamp", ts)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	var p map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	require.Equal(t, receipts.ProblemBodyTooLarge, p["code"])
	require.Equal(t, before, e.state(t, id))
	require.Zero(t, e.held(t, id))
}

// TestReceiptBeforeSendCommit: the provider's receipt comes while herald has not recorded the
// send (SENDING): 200, held; the send's commit and ApplyHeld (what the outcome writer runs
// after it) apply it. Another, whose sending process stopped before ApplyHeld, is applied by
// the sweeper; one whose send is never recorded is dropped at the end of the hold.
func TestReceiptBeforeSendCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2*time.Second)
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			early, swept, never := e.delivery(t, herald.StatusSending), e.delivery(t, herald.StatusSending), e.delivery(t, herald.StatusSending)
			for _, id := range []string{early, swept, never} {
				require.Equal(t, http.StatusOK, p.send(t, e, id, p.delivered, signed))
				require.Equal(t, herald.StatusSending, e.status(t, id))
				require.Equal(t, 1, e.held(t, id))
			}
			for _, id := range []string{early, swept} {
				ok, err := delivery.Record(context.Background(), e.pool, id, 1, time.Now(),
					delivery.Outcome{Status: herald.StatusSent, AttemptClass: herald.AttemptSent, Provider: p.name})
				require.NoError(t, err)
				require.True(t, ok)
			}
			applied, err := delivery.ApplyHeld(context.Background(), e.pool, []string{early})
			require.NoError(t, err)
			require.Len(t, applied, 1)
			require.Equal(t, herald.StatusDelivered, e.status(t, early), "applied when the send is recorded")
			require.Equal(t, herald.StatusSent, e.status(t, swept), "nothing but the sweeper applies it now")

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- e.rx.Run(ctx) }()
			defer func() { cancel(); require.NoError(t, <-done) }()
			heraldtest.WaitFor(t, 10*time.Second, "the sweeper applies the held receipt of a sent delivery", func() bool {
				return e.status(t, swept) == herald.StatusDelivered
			})
			heraldtest.WaitFor(t, 10*time.Second, "the hold ends", func() bool { return e.held(t, never) == 0 })
			require.Equal(t, herald.StatusSending, e.status(t, never))
		})
	}
}
