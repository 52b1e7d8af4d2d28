package sim

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"
	"github.com/stretchr/testify/require"
	"github.com/twilio/twilio-go/client"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/receipts"
	"github.com/heraldhq/herald/senders/sendertest"
	"github.com/heraldhq/herald/senders/sendgrid"
	"github.com/heraldhq/herald/senders/twilio"
	"github.com/heraldhq/herald/senders/vonage"
)

// receiptSink is herald's side of the receipts: it checks each signature as herald does and
// keeps (delivery id, status) in arrival order; its first answer to each receipt is 503, so
// that every receipt must be sent again.
type receiptSink struct {
	t      *testing.T
	srv    *httptest.Server
	sgKey  *ecdsa.PublicKey
	mu     sync.Mutex
	got    []string // "<provider> <status>" of every verified receipt that was answered 200
	seen   map[string]bool
	forged int
}

func newReceiptSink(t *testing.T, sgKey *ecdsa.PublicKey) *receiptSink {
	k := &receiptSink{t: t, sgKey: sgKey, seen: map[string]bool{}}
	k.srv = httptest.NewServer(http.HandlerFunc(k.serve))
	t.Cleanup(k.srv.Close)
	return k
}

func (k *receiptSink) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var name string
	ok := false
	switch r.URL.Path {
	case receipts.TwilioPath:
		v := client.NewRequestValidator("sim-token")
		ok = v.ValidateBody(k.srv.URL+r.URL.RequestURI(), body, r.Header.Get(receipts.TwilioSignatureHeader))
		form, _ := url.ParseQuery(string(body))
		name = "twilio " + form.Get("MessageStatus")
	case receipts.VonagePath:
		form, _ := url.ParseQuery(string(body))
		p := map[string]string{}
		for key := range form {
			p[key] = form.Get(key)
		}
		ok = receipts.VonageVerify("sim-secret", p)
		name = "vonage " + p["status"]
	case receipts.SendGridPath:
		ok, _ = eventwebhook.VerifySignature(k.sgKey, body, r.Header.Get(eventwebhook.VerificationHTTPHeader), r.Header.Get(eventwebhook.TimestampHTTPHeader))
		var events []map[string]any
		_ = json.Unmarshal(body, &events)
		name = "sendgrid " + events[0]["event"].(string)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !ok {
		k.forged++
		w.WriteHeader(http.StatusForbidden)
		return
	}
	if !k.seen[string(body)] { // the first copy of each: "try again"
		k.seen[string(body)] = true
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	k.got = append(k.got, name)
	w.WriteHeader(http.StatusOK)
}

func (k *receiptSink) received() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.got...)
}

// TestSimSendsSignedReceipts: an accepted Twilio, Vonage and SendGrid message each gets its
// two receipts at the URL the message (or the configuration) names, signed so that herald's
// checks pass, sent again after a 5xx, the final one first when Reorder draws it, some twice.
func TestSimSendsSignedReceipts(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	sink := newReceiptSink(t, &key.PublicKey)
	s := start(t, Config{Receipts: &Receipts{Delivered: 1, Reorder: 1, Duplicate: 0,
		TwilioAuthToken: "sim-token", VonageSignatureSecret: "sim-secret", SendGridKey: key,
		SendGridEventsURL: sink.srv.URL + receipts.SendGridPath}})
	base := "http://" + s.Addr()
	log := zap.NewNop()
	tw, err := twilio.New(twilio.Config{AccountSID: "ACsim", Password: "x", From: "+15005550001", BaseURL: base,
		StatusCallbackURL: sink.srv.URL + receipts.TwilioPath}, log)
	require.NoError(t, err)
	vo, err := vonage.New(vonage.Config{APIKey: "k", APISecret: "s", From: "Herald", BaseURL: base,
		CallbackURL: sink.srv.URL + receipts.VonagePath}, log)
	require.NoError(t, err)
	sg, err := sendgrid.New(sendgrid.Config{APIKey: "SG.x", From: "h@example.com", BaseURL: base}, log)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = tw.Send(ctx, sendertest.NewMessage(sendertest.Target{}))
	require.NoError(t, err)
	_, err = vo.Send(ctx, sendertest.NewMessage(sendertest.Target{}))
	require.NoError(t, err)
	_, err = sg.Send(ctx, sendertest.NewMessage(sendertest.Target{}))
	require.NoError(t, err)

	heraldtest.WaitFor(t, 20*time.Second, "six receipts, each after a retry", func() bool { return len(sink.received()) >= 6 })
	got := sink.received()
	require.Zero(t, sink.forged, "every signature verifies")
	for _, p := range []string{"twilio", "vonage", "sendgrid"} {
		var mine []string
		for _, g := range got {
			if len(g) > len(p) && g[:len(p)+1] == p+" " {
				mine = append(mine, g[len(p)+1:])
			}
		}
		final := map[string]string{"twilio": "delivered", "vonage": "delivered", "sendgrid": "delivered"}[p]
		require.Len(t, mine, 2, p)
		require.Equal(t, final, mine[0], "%s: Reorder 1 sends the final receipt first", p)
	}
	recs := s.Records("twilio.receipt")
	require.GreaterOrEqual(t, len(recs), 4, "each receipt recorded, the 503 and the retry")
	require.Equal(t, http.StatusServiceUnavailable, recs[0].Status)
}
