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

// TestWriteBinaryIsWrite: WriteBinary writes the headers and value that Write writes for the
// same event (with and without its optional attributes), and the record reads back through
// the SDK as that event.
func TestWriteBinaryIsWrite(t *testing.T) {
	at := time.Date(2026, 12, 1, 13, 5, 2, 114000000, time.FixedZone("CET", 3600))
	for _, b := range []Binary{
		{ID: "019a0000-0000-7000-8000-000000000001", Source: "/herald/deliveries", Type: "herald.delivery.attempt_failed",
			Subject: "019a0000-0000-7000-8000-000000000002", DataContentType: event.ApplicationJSON, Time: at,
			Extensions: []Extension{{"heraldclient", "019a0000-0000-7000-8000-000000000003"}},
			Data:       []byte(`{"status":"PENDING","retryable":true}`)},
		{ID: "e2", Source: "/s", Type: "t", Data: []byte("x")},
	} {
		e := event.New(event.CloudEventsVersionV1)
		e.SetID(b.ID)
		e.SetSource(b.Source)
		e.SetType(b.Type)
		if b.Subject != "" {
			e.SetSubject(b.Subject)
		}
		if !b.Time.IsZero() {
			e.SetTime(b.Time)
		}
		for _, x := range b.Extensions {
			e.SetExtension(x.Name, x.Value)
		}
		if b.DataContentType != "" {
			e.SetDataContentType(b.DataContentType)
		}
		e.DataEncoded = b.Data
		require.NoError(t, e.Validate())
		want := &kgo.Record{}
		require.NoError(t, Write(context.Background(), &e, want))

		got := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-1-2-01")}}}
		require.NoError(t, WriteBinary(b, got))
		require.Equal(t, kgo.RecordHeader{Key: "traceparent", Value: []byte("00-1-2-01")}, got.Headers[0], "headers already there stay")
		require.ElementsMatch(t, want.Headers, got.Headers[1:])
		require.Equal(t, want.Value, got.Value)
		read, err := binding.ToEvent(context.Background(), NewMessage(got))
		require.NoError(t, err)
		require.Equal(t, e.String(), read.String())
	}
	require.Error(t, WriteBinary(Binary{Source: "/s", Type: "t"}, &kgo.Record{}), "no id")
}

// BenchmarkEventRecord encodes one status event into a record both ways, side by side: the
// SDK's (an event.Event built, validated and written through binding.Write, as the relay did)
// and WriteBinary's (as the relay does).
//
//	go test -run '^$' -bench EventRecord -benchmem ./internal/cekafka
func BenchmarkEventRecord(b *testing.B) {
	at := time.Now()
	data := []byte(`{"notificationId":"019a0000-0000-7000-8000-000000000004","deliveryId":"019a0000-0000-7000-8000-000000000002","channel":"SMS","priority":"NORMAL","status":"SENT","attempt":1,"provider":"sms:twilio","providerMessageId":"SM1","sequence":48213,"occurredAt":"2026-12-01T13:05:02.114+00:00"}`)
	const id, subject, client = "019a0000-0000-7000-8000-000000000001", "019a0000-0000-7000-8000-000000000002", "019a0000-0000-7000-8000-000000000003"
	b.Run("sdk", func(b *testing.B) {
		for range b.N {
			e := event.New(event.CloudEventsVersionV1)
			e.SetID(id)
			e.SetSource("/herald/deliveries")
			e.SetType("herald.delivery.sent")
			e.SetSubject(subject)
			e.SetTime(at)
			e.SetExtension("heraldclient", client)
			e.SetDataContentType(event.ApplicationJSON)
			e.DataEncoded = data
			if err := e.Validate(); err != nil {
				b.Fatal(err)
			}
			rec := &kgo.Record{Headers: make([]kgo.RecordHeader, 0, 9)}
			if err := Write(context.Background(), &e, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("binary", func(b *testing.B) {
		for range b.N {
			rec := &kgo.Record{Headers: make([]kgo.RecordHeader, 0, 9)}
			if err := WriteBinary(Binary{ID: id, Source: "/herald/deliveries", Type: "herald.delivery.sent", Subject: subject,
				Time: at, DataContentType: event.ApplicationJSON, Extensions: []Extension{{"heraldclient", client}}, Data: data}, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
