package smtp

import (
	"context"
	"io"
	"mime"
	"mime/multipart"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
	"github.com/heraldhq/herald/senders/sendertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newSender(t *testing.T, k *sink, log *zap.Logger, timeout time.Duration, mod func(*Config)) *Sender {
	host, port := k.hostPort()
	cfg := Config{Host: host, Port: port, TLSConfig: k.clientT, Username: "herald", Password: "secret",
		From: "Herald <no-reply@herald.test>", Timeout: timeout}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	sendertest.Run(t, func(t *testing.T, log *zap.Logger, timeout time.Duration) sendertest.Target {
		k := newSink(t)
		return sendertest.Target{
			Sender: newSender(t, k, log, timeout, nil), Fake: k, Channel: herald.ChannelEmail,
			Codes: map[sendertest.Outcome]string{sendertest.Reject: "554", sendertest.Unavailable: "451",
				sendertest.RateLimit: "450"},
		}
	})
}

func TestMessageShapeAndConnectionReuse(t *testing.T) {
	k := newSink(t)
	s := newSender(t, k, zap.NewNop(), 5*time.Second, func(c *Config) { c.MessageIDDomain = "mail.herald.test" })
	var ids []string
	for range 3 {
		m := sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelEmail})
		res, err := s.Send(context.Background(), m)
		require.NoError(t, err)
		require.Equal(t, m.DeliveryID+"@mail.herald.test", res.ProviderMessageID)
		ids = append(ids, m.DeliveryID)
	}
	require.Equal(t, ids, k.Keys())
	msgs := k.Messages()
	require.Len(t, msgs, 3)
	msg := msgs[0]
	require.Equal(t, "<"+ids[0]+"@mail.herald.test>", msg.Header.Get("Message-Id"))
	require.Equal(t, "SUBJECT-your code", msg.Header.Get("Subject"))
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/alternative", mediaType)
	mr := multipart.NewReader(msg.Body, params["boundary"])
	var types []string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		b, _ := io.ReadAll(p)
		types = append(types, ct)
		require.NotEmpty(t, strings.TrimSpace(string(b)))
	}
	require.Equal(t, []string{"text/plain", "text/html"}, types)
	s.pool.mu.Lock()
	idle := len(s.pool.idle)
	s.pool.mu.Unlock()
	require.Equal(t, 1, idle, "sequential sends reuse one connection")
}

func TestRecipientRejectedIsPermanent(t *testing.T) {
	k := newSink(t)
	k.rcptReject = true
	s := newSender(t, k, zap.NewNop(), 5*time.Second, nil)
	m := sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelEmail})
	_, err := s.Send(context.Background(), m)
	class, se := senders.Classify(err)
	require.Equal(t, senders.Permanent, class, "%v", err)
	require.Equal(t, "550", se.Code)
	require.NotContains(t, err.Error(), m.To.Email)
	// The connection survives a rejection and serves the next message.
	k.mu.Lock()
	k.rcptReject = false
	k.mu.Unlock()
	_, err = s.Send(context.Background(), sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelEmail}))
	require.NoError(t, err)
}

func TestBadCredentialsAndUntrustedCertificate(t *testing.T) {
	k := newSink(t)
	s := newSender(t, k, zap.NewNop(), 5*time.Second, func(c *Config) { c.Password = "wrong" })
	_, err := s.Send(context.Background(), sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelEmail}))
	class, _ := senders.Classify(err)
	require.Equal(t, senders.Transient, class, "%v", err)
	require.Empty(t, k.Keys())

	s = newSender(t, k, zap.NewNop(), 5*time.Second, func(c *Config) { c.TLSConfig = nil })
	_, err = s.Send(context.Background(), sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelEmail}))
	class, _ = senders.Classify(err)
	require.Equal(t, senders.Transient, class, "untrusted certificate: %v", err)
}

func TestConnectionRefusedIsTransient(t *testing.T) {
	s, err := New(Config{Host: "127.0.0.1", Port: 1, From: "a@b.test", TLSPolicy: TLSNone}, zap.NewNop())
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Send(context.Background(), sendertest.NewMessage(sendertest.Target{Channel: herald.ChannelEmail}))
	class, se := senders.Classify(err)
	require.Equal(t, senders.Transient, class, "%v", err)
	require.Equal(t, "connection", se.Code)
}
