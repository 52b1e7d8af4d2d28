package sim

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
	"github.com/heraldhq/herald/senders/apns"
	"github.com/heraldhq/herald/senders/fcm"
	"github.com/heraldhq/herald/senders/push"
	"github.com/heraldhq/herald/senders/sendertest"
	"github.com/heraldhq/herald/senders/sendgrid"
	smtpsender "github.com/heraldhq/herald/senders/smtp"
	"github.com/heraldhq/herald/senders/twilio"
	"github.com/heraldhq/herald/senders/vonage"
	"github.com/heraldhq/herald/senders/webhook"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs a simulator on free local ports until the test ends.
func start(t testing.TB, cfg Config) *Sim {
	cfg.Addr, cfg.TLSAddr, cfg.SMTPAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.CertFile = t.TempDir() + "/sim.pem"
	s, err := New(cfg, zap.NewNop())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return s
}

// fake adapts the simulator to sendertest.Fake for one provider.
type fake struct {
	sim      *Sim
	provider string
}

func (f fake) Next(o sendertest.Outcome) {
	fl := Faults{RetryAfter: 3 * time.Second}
	switch o {
	case sendertest.Reject:
		fl.Permanent = 1
	case sendertest.Unavailable:
		fl.Unavailable = 1
	case sendertest.RateLimit:
		fl.RateLimit = 1
	case sendertest.Hang:
		fl.Timeout = 1
	}
	_ = f.sim.SetFaults(f.provider, fl)
}

func (f fake) Keys() []string {
	var keys []string
	for _, r := range f.sim.Records(f.provider) {
		keys = append(keys, r.Key)
	}
	return keys
}

var (
	keysOnce sync.Once
	rsaKey   *rsa.PrivateKey
	ecKey    *ecdsa.PrivateKey
)

func keys(t testing.TB) {
	keysOnce.Do(func() {
		var err error
		rsaKey, err = rsa.GenerateKey(rand.Reader, 2048)
		require.NoError(t, err)
		ecKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
	})
}

func pkcs8(t testing.TB, k any) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// newSender builds each real sender pointed at s.
func newSender(t testing.TB, s *Sim, provider string, log *zap.Logger, timeout time.Duration) sendertest.Sender {
	keys(t)
	base := "http://" + s.Addr()
	var (
		snd sendertest.Sender
		err error
	)
	switch provider {
	case Webhook:
		snd, err = webhook.New(webhook.Config{AllowHTTP: true, AllowLoopback: true, Timeout: timeout}, sendertest.WebhookSecrets(nil), log)
	case Twilio:
		snd, err = twilio.New(twilio.Config{AccountSID: "ACsim", Password: "x", From: "+15005550001", BaseURL: base, Timeout: timeout}, log)
	case Vonage:
		snd, err = vonage.New(vonage.Config{APIKey: "simkey", APISecret: "x", From: "Herald", BaseURL: base, Timeout: timeout}, log)
	case SendGrid:
		snd, err = sendgrid.New(sendgrid.Config{APIKey: "SG.sim", From: "Herald <herald@sim.test>", BaseURL: base, Timeout: timeout}, log)
	case FCM:
		creds, _ := json.Marshal(map[string]string{"type": "service_account", "project_id": "sim", "client_email": "sim@sim.iam",
			"private_key": string(pkcs8(t, rsaKey)), "token_uri": base + "/token"})
		snd, err = fcm.New(fcm.Config{CredentialsJSON: creds, BaseURL: base, Timeout: timeout}, log)
	case APNs:
		snd, err = apns.New(apns.Config{KeyPEM: pkcs8(t, ecKey), KeyID: "K", TeamID: "T", Topic: "com.example",
			BaseURL: "https://" + s.TLSAddr(), Timeout: timeout, HTTP: senders.HTTPConfig{CAFile: s.cfg.CertFile}}, log)
	case SMTP:
		host, port, _ := net.SplitHostPort(s.SMTPAddr())
		p, _ := strconv.Atoi(port)
		var ss *smtpsender.Sender
		ss, err = smtpsender.New(smtpsender.Config{Host: host, Port: p, CAFile: s.cfg.CertFile, Username: "u", Password: "p",
			From: "herald@sim.test", Timeout: timeout}, log)
		if ss != nil {
			t.Cleanup(func() { _ = ss.Close() })
		}
		snd = ss
	}
	require.NoError(t, err)
	return snd
}

var channels = map[string]herald.Channel{Webhook: herald.ChannelWebhook, Twilio: herald.ChannelSMS, FCM: herald.ChannelPush,
	APNs: herald.ChannelPush, SMTP: herald.ChannelEmail, Vonage: herald.ChannelSMS, SendGrid: herald.ChannelEmail}

// TestSendersAgainstSimulator runs the conformance suite for every sender against the
// simulator: the simulator speaks each protocol well enough for every outcome.
func TestSendersAgainstSimulator(t *testing.T) {
	for _, p := range Providers {
		t.Run(p, func(t *testing.T) {
			sendertest.Run(t, func(t *testing.T, log *zap.Logger, timeout time.Duration) sendertest.Target {
				s := start(t, Config{WebhookSecret: sendertest.WebhookSecret})
				tg := sendertest.Target{Sender: newSender(t, s, p, log, timeout), Fake: fake{s, p}, Channel: channels[p],
					WebhookURL: "http://" + s.Addr() + "/webhook/orders", RetryAfter: 3 * time.Second}
				if p == APNs {
					tg.Platform = "APNS"
				}
				if p == SMTP || p == Vonage { // no Retry-After in the protocol (Vonage: status 1 in a 200)
					tg.RetryAfter = 0
				}
				if p == Twilio { // a Twilio 5xx may hide a queued message
					tg.Classes = map[sendertest.Outcome]senders.Class{sendertest.Unavailable: senders.Ambiguous}
				}
				return tg
			})
		})
	}
}

// BenchmarkSendersAgainstSimulator measures each sender's cost per send against a
// zero-latency, fault-free simulator on the same machine (client and server share the CPU).
func BenchmarkSendersAgainstSimulator(b *testing.B) {
	for _, p := range Providers {
		b.Run(p, func(b *testing.B) {
			s := start(b, Config{MaxRecords: 1000})
			snd := newSender(b, s, p, zap.NewNop(), 10*time.Second)
			tg := sendertest.Target{Channel: channels[p], WebhookURL: "http://" + s.Addr() + "/webhook/bench"}
			if p == APNs {
				tg.Platform = "APNS"
			}
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := snd.Send(context.Background(), sendertest.NewMessage(tg)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			st := s.Stats()[p]
			require.Zero(b, st.Duplicates)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
		})
	}
}

// The development credentials the simulator writes work with the real senders.
func TestDevCredentials(t *testing.T) {
	s := start(t, Config{})
	dir := t.TempDir()
	require.NoError(t, s.WriteDevCredentials(dir))
	creds, err := os.ReadFile(dir + "/" + FCMCredentialsFile)
	require.NoError(t, err)
	f, err := fcm.New(fcm.Config{CredentialsJSON: creds, BaseURL: "http://" + s.Addr()}, zap.NewNop())
	require.NoError(t, err)
	key, err := os.ReadFile(dir + "/" + APNsKeyFile)
	require.NoError(t, err)
	a, err := apns.New(apns.Config{KeyPEM: key, KeyID: "SIMKEY0001", TeamID: "SIMTEAM001", Topic: "com.example",
		BaseURL: "https://" + s.TLSAddr(), HTTP: senders.HTTPConfig{CAFile: s.cfg.CertFile}}, zap.NewNop())
	require.NoError(t, err)
	_, err = f.Send(context.Background(), sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelPush, Platform: "FCM"}))
	require.NoError(t, err)
	_, err = a.Send(context.Background(), sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelPush, Platform: "APNS"}))
	require.NoError(t, err)
	require.Equal(t, int64(1), s.Stats()[FCM].Delivered)
	require.Equal(t, int64(1), s.Stats()[APNs].Delivered)
}

// A PUSH delivery to an Android and an iPhone whose APNs token is gone: sent through FCM,
// the APNs token reported for removal.
func TestPushFanOutThroughSimulator(t *testing.T) {
	s := start(t, Config{Faults: map[string]Faults{APNs: {Permanent: 1}}})
	p, err := push.New(push.Config{}, map[string]push.PlatformSender{
		"FCM":  newSender(t, s, FCM, zap.NewNop(), 5*time.Second),
		"APNS": newSender(t, s, APNs, zap.NewNop(), 5*time.Second),
	}, zap.NewNop())
	require.NoError(t, err)
	m := sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelPush})
	m.To.PushTokens = []senders.PushToken{{Token: "android-1", Platform: "FCM"}, {Token: "iphone-1", Platform: "APNS"}}
	res, err := p.Send(context.Background(), m)
	require.NoError(t, err)
	require.Equal(t, "1/2", res.Code)
	require.Equal(t, []string{"iphone-1"}, res.InvalidTokens)
	require.Equal(t, m.DeliveryID, s.Records(FCM)[0].Key)
	require.Equal(t, m.DeliveryID, s.Records(APNs)[0].Key)

	require.NoError(t, s.SetFaults(FCM, Faults{Unavailable: 1, RetryAfter: 2 * time.Second}))
	res, err = p.Send(context.Background(), m)
	class, se := senders.Classify(err)
	require.Equal(t, senders.Transient, class, "an outage beats a gone token: retry later")
	require.Equal(t, 2*time.Second, se.RetryAfter)
	require.Equal(t, []string{"iphone-1"}, res.InvalidTokens)
}

// The Vonage and SendGrid endpoints refuse a request without credentials as the providers do
// (Vonage: status 4 in a 200 answer; SendGrid: 401 with its errors array), and record it.
func TestVonageAndSendGridCheckCredentials(t *testing.T) {
	s := start(t, Config{})
	base := "http://" + s.Addr()
	resp, err := http.PostForm(base+"/sms/json", url.Values{"from": {"Herald"}, "to": {"15005550006"}, "text": {"hi"}, "client-ref": {"d-1"}})
	require.NoError(t, err)
	var v struct {
		Messages []struct {
			Status string `json:"status"`
		} `json:"messages"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "4", v.Messages[0].Status)

	resp, err = http.Post(base+"/v3/mail/send", "application/json", strings.NewReader(
		`{"personalizations":[{"to":[{"email":"a@b.c"}]}],"from":{"email":"h@b.c"},"subject":"s","content":[{"type":"text/plain","value":"x"}],"custom_args":{"herald_delivery_id":"d-2"}}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	recs := s.Records("")
	require.Len(t, recs, 2)
	require.Equal(t, Record{Seq: 1, Provider: Vonage, Key: "d-1", Outcome: Rejected, Status: http.StatusOK, ReceivedAt: recs[0].ReceivedAt}, recs[0])
	require.Equal(t, Record{Seq: 2, Provider: SendGrid, Key: "d-2", Outcome: Rejected, Status: http.StatusUnauthorized, ReceivedAt: recs[1].ReceivedAt}, recs[1])
}
