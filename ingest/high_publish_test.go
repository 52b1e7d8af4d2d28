package ingest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/stacktest"
)

// An accepted HIGH delivery due at once is on the HIGH topic when its POST has been answered,
// with the relay's record contract (key, headers, value) and a traceparent in the request's
// trace; a NORMAL one, a HIGH one due later (sendAt) and a replayed request publish nothing.
func TestAcceptedHighIsPublishedAtOnce(t *testing.T) {
	t.Parallel()
	topic := stacktest.KafkaTopics(t, map[string]int32{"high": 1})["high"]
	kcl, err := kgo.NewClient(kgo.SeedBrokers(stacktest.KafkaBrokers(t)...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	t.Cleanup(kcl.Close)
	e := newEnvWith(t, Config{}, zaptest.NewLogger(t), PublishHigh(kcl, topic))
	e.template("otp", "auth", "SMS")

	body := func(prio herald.Priority, extra string) string {
		return fmt.Sprintf(`{"userId":1,"template":"otp","priority":%q,"channels":["SMS"],"to":{"phone":"+15550000001"}%s}`, prio, extra)
	}
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	post := func(key, b string) string {
		res := e.do(http.MethodPost, "/api/notifications", b, map[string]string{"Idempotency-Key": key,
			"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"})
		require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
		return res.json(t)["deliveries"].([]any)[0].(map[string]any)["id"].(string)
	}
	high := post("high", body(herald.PriorityHigh, ""))
	post("high", body(herald.PriorityHigh, "")) // the replay: nothing new committed
	post("normal", body(herald.PriorityNormal, ""))
	post("later", body(herald.PriorityHigh, `,"sendAt":"2099-01-01T00:00:00Z"`))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, kcl.Flush(ctx)) // every record the API handed over is acknowledged or failed

	recs := readTopic(ctx, t, topic)
	require.Len(t, recs, 1, "one record: the HIGH delivery due at once")
	r := recs[0]
	require.Equal(t, high, string(r.Key))
	msg, err := herald.UnmarshalDeliveryMessage(r.Value)
	require.NoError(t, err)
	require.Equal(t, high, msg.DeliveryID)
	require.Equal(t, herald.PriorityHigh, msg.Priority)
	require.Equal(t, herald.ChannelSMS, msg.Channel)
	require.Zero(t, msg.Attempts)
	headers := map[string]string{}
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
	}
	require.Equal(t, high, headers[herald.HeaderDeliveryID])
	require.Equal(t, "1", headers[herald.HeaderAttempt])
	require.Regexp(t, "^00-"+traceID+"-[0-9a-f]{16}-01$", headers[herald.HeaderTraceparent])
}

// readTopic returns every record of topic up to its end offsets now.
func readTopic(ctx context.Context, t *testing.T, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(stacktest.KafkaBrokers(t)...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	var out []*kgo.Record
	for int64(len(out)) < want {
		f := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records", len(out), want)
		out = append(out, f.Records()...)
	}
	return out
}
