package cdc

import (
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// testRelation describes a delivery table with the given column order.
func testRelation(cols ...string) *relation {
	m := &pglogrepl.RelationMessage{RelationID: 1, Namespace: "public", RelationName: "delivery"}
	for _, c := range cols {
		m.Columns = append(m.Columns, &pglogrepl.RelationMessageColumn{Name: c})
	}
	return newRelation(m)
}

// testTuple builds a tuple for rel from values by column name; a missing name is NULL,
// the value "\x00toast" an unchanged TOAST column.
func testTuple(rel *relation, values map[string]string) *pglogrepl.TupleData {
	tuple := &pglogrepl.TupleData{Columns: make([]*pglogrepl.TupleDataColumn, len(rel.columns))}
	for name, i := range rel.columns {
		v, ok := values[name]
		switch {
		case !ok:
			tuple.Columns[i] = &pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeNull}
		case v == "\x00toast":
			tuple.Columns[i] = &pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeToast}
		default:
			tuple.Columns[i] = &pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeText, Data: []byte(v)}
		}
	}
	tuple.ColumnNum = uint16(len(tuple.Columns))
	return tuple
}

var deliveryColumns = []string{"id", "notification_id", "channel", "priority", "status", "attempts",
	"next_attempt_at", "expires_at", "traceparent", "last_error", "provider", "provider_message_id",
	"created_at", "updated_at", "sent_at"}

func baseValues() map[string]string {
	return map[string]string{
		"id":              "0190c6d4-0000-7000-8000-000000000001",
		"notification_id": "0190c6d4-0000-7000-8000-000000000002",
		"channel":         "SMS",
		"priority":        "HIGH",
		"status":          "PENDING",
		"attempts":        "2",
		"next_attempt_at": "2026-11-30 00:00:00.5+00",
		"updated_at":      "2026-11-30 00:00:01.123456+00",
		"created_at":      "2026-11-30 00:00:00+00",
		"traceparent":     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
}

func TestDecodeDueRow(t *testing.T) {
	rel := testRelation(deliveryColumns...)
	row, err := newTupleDecoder().decode(rel, testTuple(rel, baseValues()))
	require.NoError(t, err)
	require.True(t, row.due())
	require.Equal(t, "0190c6d4-0000-7000-8000-000000000001", row.ID)
	require.Equal(t, herald.ChannelSMS, row.Channel)
	require.Equal(t, herald.PriorityHigh, row.Priority)
	require.Equal(t, 2, row.Attempts)
	require.Equal(t, time.Date(2026, 11, 30, 0, 0, 1, 123456000, time.UTC), row.UpdatedAt.UTC())
	require.Equal(t, baseValues()["traceparent"], row.Traceparent)
}

func TestDecodeFindsColumnsByName(t *testing.T) {
	// Columns reordered, one dropped (provider), one added: positions change, names do not.
	cols := []string{"extra", "updated_at", "status", "id", "priority", "channel", "attempts",
		"next_attempt_at", "notification_id", "traceparent"}
	rel := testRelation(cols...)
	v := baseValues()
	v["extra"] = "x"
	row, err := newTupleDecoder().decode(rel, testTuple(rel, v))
	require.NoError(t, err)
	require.True(t, row.due())
	require.Equal(t, herald.PriorityHigh, row.Priority)
}

func TestDecodeDecision(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(map[string]string)
		due    bool
	}{
		"pending and due":           {func(map[string]string) {}, true},
		"due exactly at write time": {func(v map[string]string) { v["next_attempt_at"] = v["updated_at"] }, true},
		"not yet due":               {func(v map[string]string) { v["next_attempt_at"] = "2026-11-30 00:00:02+00" }, false},
		"other time zone":           {func(v map[string]string) { v["next_attempt_at"] = "2026-11-30 01:00:02+01" }, false},
		"queued":                    {func(v map[string]string) { v["status"] = "QUEUED" }, false},
		"sent":                      {func(v map[string]string) { v["status"] = "SENT" }, false},
		"infinitely deferred":       {func(v map[string]string) { v["next_attempt_at"] = "infinity" }, false},
		"no traceparent":            {func(v map[string]string) { delete(v, "traceparent") }, true},
	} {
		t.Run(name, func(t *testing.T) {
			rel := testRelation(deliveryColumns...)
			v := baseValues()
			tc.change(v)
			row, err := newTupleDecoder().decode(rel, testTuple(rel, v))
			require.NoError(t, err)
			require.Equal(t, tc.due, row.due())
		})
	}
}

func TestDecodeUnchangedToast(t *testing.T) {
	rel := testRelation(deliveryColumns...)
	v := baseValues()
	v["last_error"] = "\x00toast" // not needed: fine
	_, err := newTupleDecoder().decode(rel, testTuple(rel, v))
	require.NoError(t, err)

	v["traceparent"] = "\x00toast" // needed to publish: left to the sweeper
	_, err = newTupleDecoder().decode(rel, testTuple(rel, v))
	require.ErrorIs(t, err, errUnchangedToast)

	v = baseValues()
	v["traceparent"] = "\x00toast"
	v["status"] = "SENT" // not published: the TOAST column does not matter
	row, err := newTupleDecoder().decode(rel, testTuple(rel, v))
	require.NoError(t, err)
	require.False(t, row.due())
}

func TestDecodeErrors(t *testing.T) {
	rel := testRelation("id", "status")
	_, err := newTupleDecoder().decode(rel, testTuple(rel, baseValues()))
	require.ErrorContains(t, err, "column attempts missing")

	rel = testRelation(deliveryColumns...)
	v := baseValues()
	v["updated_at"] = "yesterday-ish"
	_, err = newTupleDecoder().decode(rel, testTuple(rel, v))
	require.ErrorContains(t, err, "updated_at")

	v = baseValues()
	v["priority"] = "URGENT"
	_, err = newTupleDecoder().decode(rel, testTuple(rel, v))
	require.ErrorContains(t, err, "priority")
}

func TestParseWALRejectsMalformedMessages(t *testing.T) {
	_, err := parseWAL(nil)
	require.Error(t, err)
	_, err = parseWAL([]byte("I"))
	require.Error(t, err)
}

// FuzzDecodeTuple feeds arbitrary column contents and tuple data types through the decoder:
// it must return an error or a row, never panic, and a row it calls due must be PENDING
// with next_attempt_at <= updated_at.
func FuzzDecodeTuple(f *testing.F) {
	v := baseValues()
	f.Add(v["status"], v["attempts"], v["next_attempt_at"], v["updated_at"], v["priority"], byte('t'), byte('t'))
	f.Add("PENDING", "-1", "infinity", "-infinity", "LOW", byte('u'), byte('n'))
	f.Fuzz(func(t *testing.T, status, attempts, next, updated, priority string, statusType, traceType byte) {
		rel := testRelation(deliveryColumns...)
		values := baseValues()
		values["status"], values["attempts"], values["next_attempt_at"] = status, attempts, next
		values["updated_at"], values["priority"] = updated, priority
		tuple := testTuple(rel, values)
		tuple.Columns[rel.columns["status"]].DataType = statusType
		tuple.Columns[rel.columns["traceparent"]].DataType = traceType
		row, err := newTupleDecoder().decode(rel, tuple)
		if err != nil || !row.due() {
			return
		}
		require.Equal(t, herald.StatusPending, row.Status)
		require.False(t, row.NextAttemptAt.After(row.UpdatedAt))
		_, perr := herald.ParsePriority(string(row.Priority))
		require.NoError(t, perr)
	})
}

// TestDecodeStopsAtAStatusOtherThanPending: herald's own updates of a row (QUEUED, SENDING,
// the outcome) are most of what the stream reads, and none can be due; their times are not
// parsed (here they could not be).
func TestDecodeStopsAtAStatusOtherThanPending(t *testing.T) {
	rel := testRelation(deliveryColumns...)
	for _, status := range []herald.Status{herald.StatusQueued, herald.StatusSending, herald.StatusSent} {
		v := baseValues()
		v["status"] = string(status)
		v["next_attempt_at"], v["updated_at"] = "not a time", "not a time"
		row, err := newTupleDecoder().decode(rel, testTuple(rel, v))
		require.NoError(t, err, status)
		require.Equal(t, status, row.Status)
		require.False(t, row.due())
	}
}
