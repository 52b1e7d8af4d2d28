package cdc

import (
	"encoding/binary"
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

// updateBytes encodes a pgoutput UPDATE message of relation 1 (its type byte included) with
// the new tuple of values by column name, as testTuple reads them, and the old tuple if old
// is 'K' or 'O'.
func updateBytes(rel *relation, old byte, values map[string]string) []byte {
	msg := []byte{'U', 0, 0, 0, 1}
	if old != 0 {
		msg = append(msg, old)
		msg = appendTuple(msg, testTuple(rel, values))
	}
	msg = append(msg, 'N')
	return appendTuple(msg, testTuple(rel, values))
}

func appendTuple(b []byte, t *pglogrepl.TupleData) []byte {
	b = binary.BigEndian.AppendUint16(b, t.ColumnNum)
	for _, c := range t.Columns {
		b = append(b, c.DataType)
		if c.DataType == pglogrepl.TupleDataTypeText || c.DataType == pglogrepl.TupleDataTypeBinary {
			b = binary.BigEndian.AppendUint32(b, uint32(len(c.Data)))
			b = append(b, c.Data...)
		}
	}
	return b
}

// TestDroppableUpdates: herald's own updates of a delivery (QUEUED, SENDING, an outcome) and
// any update of another published table are dropped off the message's bytes; a PENDING row,
// a status the bytes cannot tell, an unknown relation and a message that is not well formed
// go to the full parse.
func TestDroppableUpdates(t *testing.T) {
	rel := testRelation(deliveryColumns...)
	rels := map[uint32]*relation{1: rel}
	with := func(status string) map[string]string {
		v := baseValues()
		v["status"] = status
		if status == "" {
			delete(v, "status")
		}
		return v
	}
	for _, tc := range []struct {
		name string
		msg  []byte
		drop bool
	}{
		{"queued", updateBytes(rel, 0, with("QUEUED")), true},
		{"sent", updateBytes(rel, 0, with("SENT")), true},
		{"sending, old tuple sent in full", updateBytes(rel, 'O', with("SENDING")), true},
		{"sending, old key sent", updateBytes(rel, 'K', with("SENDING")), true},
		{"pending", updateBytes(rel, 0, with("PENDING")), false},
		{"pending, old tuple sent in full", updateBytes(rel, 'O', with("PENDING")), false},
		{"status null", updateBytes(rel, 0, with("")), false},
		{"status a prefix of PENDING", updateBytes(rel, 0, with("PEND")), true},
		{"a byte too many", append(updateBytes(rel, 0, with("QUEUED")), 0), false},
		{"no new tuple", []byte{'U', 0, 0, 0, 1, 'X'}, false},
		{"unknown relation", append([]byte{'U', 0, 0, 0, 2}, updateBytes(rel, 0, with("QUEUED"))[5:]...), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.drop, droppable(tc.msg[1:], rels))
		})
	}

	t.Run("status unchanged TOAST", func(t *testing.T) {
		require.False(t, droppable(updateBytes(rel, 0, with("\x00toast"))[1:], rels))
	})
	t.Run("truncated anywhere", func(t *testing.T) {
		msg := updateBytes(rel, 'O', with("QUEUED"))
		for n := 1; n < len(msg); n++ {
			require.False(t, droppable(msg[1:n], rels), "cut at %d of %d", n, len(msg))
		}
	})
	t.Run("a table without status", func(t *testing.T) {
		r := testRelation("id", "updated_at")
		require.False(t, droppable(updateBytes(r, 0, baseValues())[1:], map[uint32]*relation{1: r}))
	})
	t.Run("another published table", func(t *testing.T) {
		r := testRelation("id", "status")
		r.name = eventTable
		require.True(t, droppable(updateBytes(r, 0, with("PENDING"))[1:], map[uint32]*relation{1: r}))
	})
}

// FuzzDroppable feeds arbitrary UPDATE messages to droppable: it never panics, and an update it
// drops is one the full parse reads, with a new delivery tuple the full path would not
// publish either.
func FuzzDroppable(f *testing.F) {
	rel := testRelation(deliveryColumns...)
	for _, s := range []string{"QUEUED", "PENDING", "SENT"} {
		v := baseValues()
		v["status"] = s
		f.Add(updateBytes(rel, 0, v)[1:])
		f.Add(updateBytes(rel, 'O', v)[1:])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !droppable(body, map[uint32]*relation{1: rel}) {
			return
		}
		m, err := parseWAL(append([]byte{'U'}, body...))
		require.NoError(t, err)
		u, ok := m.(*pglogrepl.UpdateMessage)
		require.True(t, ok)
		// The full path publishes nothing for a row it cannot decode either.
		if row, err := newTupleDecoder().decode(rel, u.NewTuple); err == nil {
			require.NotEqual(t, herald.StatusPending, row.Status)
			require.False(t, row.due())
		}
	})
}

// BenchmarkHandleUpdate is the stream's work for one of herald's own updates of a delivery
// (here a claim's: SENDING), which it drops.
func BenchmarkHandleUpdate(b *testing.B) {
	rel := testRelation(deliveryColumns...)
	v := baseValues()
	v["status"] = "SENDING"
	msg := updateBytes(rel, 0, v)
	s := &stream{relations: map[uint32]*relation{1: rel}, dec: newTupleDecoder(), cur: &txn{}}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.handleWAL(msg, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
}
