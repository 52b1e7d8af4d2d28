package cekafka

import (
	"context"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestWriteThenRead: an event written to a record is binary mode (ce_ headers,
// content-type, the data as the value) and reads back, through the SDK, as the same event.
func TestWriteThenRead(t *testing.T) {
	e := event.New(event.CloudEventsVersionV1)
	e.SetID("019a0000-0000-7000-8000-000000000001")
	e.SetSource("/herald/deliveries")
	e.SetType("herald.delivery.sent")
	e.SetSubject("019a0000-0000-7000-8000-000000000002")
	e.SetTime(time.Date(2026, 12, 1, 13, 0, 0, 123456000, time.UTC))
	e.SetExtension("heraldclient", "019a0000-0000-7000-8000-000000000003")
	require.NoError(t, e.SetData(event.ApplicationJSON, map[string]string{"status": "SENT"}))
	rec := &kgo.Record{}
	require.NoError(t, Write(context.Background(), &e, rec))

	headers := map[string]string{}
	for _, h := range rec.Headers {
		headers[h.Key] = string(h.Value)
	}
	require.Equal(t, map[string]string{
		"ce_specversion": "1.0", "ce_id": e.ID(), "ce_source": e.Source(), "ce_type": e.Type(),
		"ce_subject": e.Subject(), "ce_time": "2026-12-01T13:00:00.123456Z", "ce_heraldclient": "019a0000-0000-7000-8000-000000000003",
		"content-type": "application/json",
	}, headers)
	require.JSONEq(t, `{"status":"SENT"}`, string(rec.Value))

	got, err := binding.ToEvent(context.Background(), NewMessage(rec))
	require.NoError(t, err)
	require.Equal(t, e.String(), got.String())

	require.Equal(t, binding.EncodingUnknown, NewMessage(&kgo.Record{Value: []byte("{}")}).ReadEncoding(), "no ce_specversion: not an event")
}
