package dispatch

import (
	"context"

	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/tracelog"
	"github.com/heraldhq/herald/senders"
)

// LogSender is a Sender for local runs: it accepts every message and logs its delivery id,
// channel and attempt. It never logs recipients or content.
type LogSender struct {
	Channel herald.Channel
	Log     *zap.Logger
}

// NewLogSenders returns a LogSender for every channel.
func NewLogSenders(log *zap.Logger) map[herald.Channel]Sender {
	m := make(map[herald.Channel]Sender, len(herald.Channels))
	for _, ch := range herald.Channels {
		m[ch] = LogSender{Channel: ch, Log: log.With(zap.String("component", "log-sender"))}
	}
	return m
}

// Provider implements Sender.
func (s LogSender) Provider() string { return "log:" + string(s.Channel) }

// Send implements Sender.
func (s LogSender) Send(ctx context.Context, m *senders.Message) (senders.Result, error) {
	s.Log.Info("send", tracelog.Delivery(ctx, m.DeliveryID),
		zap.String("channel", string(m.Channel)), zap.Int("attempt", m.Attempt))
	return senders.Result{Provider: s.Provider(), ProviderMessageID: m.DeliveryID, Code: "LOGGED"}, nil
}
