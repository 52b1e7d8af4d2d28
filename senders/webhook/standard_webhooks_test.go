package webhook_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/stacktest"
	"github.com/heraldhq/herald/senders/sendertest"
	"github.com/heraldhq/herald/senders/webhook"
)

// received is one request the receiver got.
type received struct {
	header http.Header
	body   []byte
}

// receiver is an httptest server that records every webhook and answers 204.
func receiver(t *testing.T) (*httptest.Server, func() []received) {
	var mu sync.Mutex
	var got []received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		mu.Lock()
		got = append(got, received{r.Header.Clone(), b})
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return append([]received(nil), got...)
	}
}

// send posts one webhook of clientID through the real sender, whose secrets come from
// PostgreSQL (the lookup herald serve wires in), and returns what the receiver got.
func send(t *testing.T, s *webhook.Sender, url, clientID string) received {
	t.Helper()
	srv, got := receiver(t)
	m := sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelWebhook, WebhookURL: srv.URL + url})
	m.ClientID = clientID
	_, err := s.Send(context.Background(), m)
	require.NoError(t, err)
	all := got()
	require.Len(t, all, 1)
	require.Equal(t, m.DeliveryID, all[0].header.Get("webhook-id"), "webhook-id is the delivery id")
	return all[0]
}

func newSender(t *testing.T) (*webhook.Sender, *pgxpool.Pool, func(name string) apikey.NewAPIClient) {
	pool := stacktest.Postgres(t)
	secrets := apikey.NewWebhookSecrets(pool, -1) // no cache: each send reads the database
	s, err := webhook.New(webhook.Config{AllowHTTP: true, AllowLoopback: true}, secrets, zaptest.NewLogger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	create := func(name string) apikey.NewAPIClient {
		c, err := apikey.CreateAPIClient(context.Background(), pool, name, apikey.DefaultScopes())
		require.NoError(t, err)
		return c
	}
	return s, pool, create
}

func verifier(t *testing.T, secret string) *standardwebhooks.Webhook {
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	return wh
}

// TestReferenceLibraryVerifiesRealWebhooks: the specification's reference Go library, which
// herald did not write, verifies a webhook herald's sender really sent, with the secret
// `herald apikey create` printed for the notification's client.
func TestReferenceLibraryVerifiesRealWebhooks(t *testing.T) {
	s, _, create := newSender(t)
	a := create("a")
	r := send(t, s, "/hook", a.ID)
	require.NoError(t, verifier(t, a.WebhookSecret).Verify(r.body, r.header))

	ts, err := strconv.ParseInt(r.header.Get("webhook-timestamp"), 10, 64)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), time.Unix(ts, 0), time.Minute)
	require.Regexp(t, `^v1,[A-Za-z0-9+/]{43}=$`, r.header.Get("webhook-signature"), "one secret, one signature")
	require.Empty(t, r.header.Get("Herald-Signature"), "the old header is gone")
	require.Equal(t, r.header.Get("webhook-id"), r.header.Get("Idempotency-Key"))

	// A tampered body does not verify.
	require.Error(t, verifier(t, a.WebhookSecret).Verify(append(r.body, ' '), r.header))
}

// TestOtherClientsSecretDoesNotVerify: client B's secret does not verify client A's
// webhook, nor A's B's, even for the same URL and body: B cannot produce a request A's
// receiver accepts.
func TestOtherClientsSecretDoesNotVerify(t *testing.T) {
	s, _, create := newSender(t)
	a, b := create("a"), create("b")
	require.NotEqual(t, a.WebhookSecret, b.WebhookSecret)
	ra := send(t, s, "/a", a.ID)
	rb := send(t, s, "/a", b.ID)
	require.ErrorIs(t, verifier(t, b.WebhookSecret).Verify(ra.body, ra.header), standardwebhooks.ErrNoMatchingSignature)
	require.ErrorIs(t, verifier(t, a.WebhookSecret).Verify(rb.body, rb.header), standardwebhooks.ErrNoMatchingSignature)
	require.NoError(t, verifier(t, a.WebhookSecret).Verify(ra.body, ra.header))
	require.NoError(t, verifier(t, b.WebhookSecret).Verify(rb.body, rb.header))
}

// TestRotationWindow: after a rotation each webhook carries two signatures, and both the new
// and the previous secret verify it, until the window ends (here: --expire-previous).
func TestRotationWindow(t *testing.T) {
	ctx := context.Background()
	s, pool, create := newSender(t)
	a, b := create("a"), create("b")

	rotated, err := apikey.RotateWebhookSecret(ctx, pool, a.ID, time.Hour)
	require.NoError(t, err)
	require.NotEqual(t, a.WebhookSecret, rotated)
	r := send(t, s, "/hook", a.ID)
	require.Regexp(t, `^v1,\S+ v1,\S+$`, r.header.Get("webhook-signature"), "two signatures during the window")
	require.NoError(t, verifier(t, rotated).Verify(r.body, r.header), "the new secret verifies")
	require.NoError(t, verifier(t, a.WebhookSecret).Verify(r.body, r.header), "the previous secret verifies")
	rb := send(t, s, "/hook", b.ID)
	require.Regexp(t, `^v1,\S+$`, rb.header.Get("webhook-signature"), "another client's rotation changes nothing for b")
	require.NoError(t, verifier(t, b.WebhookSecret).Verify(rb.body, rb.header))

	require.NoError(t, apikey.ExpirePreviousWebhookSecret(ctx, pool, a.ID))
	r = send(t, s, "/hook", a.ID)
	require.NoError(t, verifier(t, rotated).Verify(r.body, r.header))
	require.ErrorIs(t, verifier(t, a.WebhookSecret).Verify(r.body, r.header), standardwebhooks.ErrNoMatchingSignature)

	// A window that has passed ends by itself.
	again, err := apikey.RotateWebhookSecret(ctx, pool, a.ID, 0)
	require.NoError(t, err)
	r = send(t, s, "/hook", a.ID)
	require.NoError(t, verifier(t, again).Verify(r.body, r.header))
	require.Error(t, verifier(t, rotated).Verify(r.body, r.header))
}
