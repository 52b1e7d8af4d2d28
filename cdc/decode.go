package cdc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/heraldhq/herald"
)

// deliveryRow is the part of a delivery row the relay needs to decide and to publish.
type deliveryRow struct {
	ID             string
	NotificationID string
	Channel        herald.Channel
	Priority       herald.Priority
	Status         herald.Status
	Attempts       int
	NextAttemptAt  time.Time
	UpdatedAt      time.Time
	Traceparent    string // "" when the row has none
}

// due reports whether the relay publishes this version of the row: PENDING and due at the
// time it was written, both times from the database clock.
func (r deliveryRow) due() bool {
	return r.Status == herald.StatusPending && !r.NextAttemptAt.After(r.UpdatedAt)
}

// errUnchangedToast marks a tuple in which a column the relay needs arrived as an unchanged
// TOAST value, i.e. without its data.
var errUnchangedToast = errors.New("unchanged TOAST value")

// relation maps the column names of one table to their positions in its tuples, as the last
// RelationMessage for that table described them. Columns are found by name, never by
// position: ALTER TABLE may add, drop and reorder them while the relay streams.
type relation struct {
	namespace, name string
	columns         map[string]int
}

func newRelation(m *pglogrepl.RelationMessage) *relation {
	r := &relation{namespace: m.Namespace, name: m.RelationName, columns: make(map[string]int, len(m.Columns))}
	for i, c := range m.Columns {
		r.columns[c.Name] = i
	}
	return r
}

// droppable reports whether body, a pgoutput UPDATE message after its type byte, is one the
// relay has nothing to do with, read off its bytes without decoding it: an update of a
// known table other than delivery (the relay publishes status events when they are
// inserted), or a delivery row whose new status is not PENDING. Most of the stream is
// such updates (the mark, the claim, the outcome of every delivery), and pglogrepl's
// parse of one allocates every column of the row twice over.
//
// It says false whenever the full parse must decide: an unknown relation, a status that is
// NULL or not in text, a message that is not well formed to its last byte (the full parse
// turns it into the session's error).
func droppable(body []byte, relations map[uint32]*relation) bool {
	if len(body) < 5 {
		return false
	}
	rel, ok := relations[binary.BigEndian.Uint32(body)]
	if !ok {
		return false
	}
	if rel.name != deliveryTable {
		return true
	}
	statusAt, ok := rel.columns["status"]
	if !ok {
		return false
	}
	p := body[4:]
	if p[0] == pglogrepl.UpdateMessageTupleTypeKey || p[0] == pglogrepl.UpdateMessageTupleTypeOld {
		n, _, ok := walkTuple(p[1:], -1)
		if !ok {
			return false
		}
		p = p[1+n:]
	}
	if len(p) == 0 || p[0] != pglogrepl.UpdateMessageTupleTypeNew {
		return false
	}
	n, status, ok := walkTuple(p[1:], statusAt)
	return ok && 1+n == len(p) && status != nil && string(status) != string(herald.StatusPending)
}

// walkTuple walks pgoutput TupleData at the start of p and returns its length and the text of
// column want (nil if want is out of range, or the column is NULL, unchanged TOAST or
// binary). ok is false if p ends before the tuple does or holds a column kind pgoutput does
// not send.
func walkTuple(p []byte, want int) (n int, text []byte, ok bool) {
	if len(p) < 2 {
		return 0, nil, false
	}
	cols := int(binary.BigEndian.Uint16(p))
	n = 2
	for i := range cols {
		if n >= len(p) {
			return 0, nil, false
		}
		kind := p[n]
		n++
		switch kind {
		case pglogrepl.TupleDataTypeNull, pglogrepl.TupleDataTypeToast:
		case pglogrepl.TupleDataTypeText, pglogrepl.TupleDataTypeBinary:
			if len(p)-n < 4 {
				return 0, nil, false
			}
			size := binary.BigEndian.Uint32(p[n:])
			n += 4
			if uint64(size) > uint64(len(p)-n) {
				return 0, nil, false
			}
			if i == want && kind == pglogrepl.TupleDataTypeText {
				text = p[n : n+int(size)]
			}
			n += int(size)
		default:
			return 0, nil, false
		}
	}
	return n, text, true
}

// tupleDecoder decodes delivery tuples. It is not safe for concurrent use.
type tupleDecoder struct {
	types *pgtype.Map
}

func newTupleDecoder() *tupleDecoder { return &tupleDecoder{types: pgtype.NewMap()} }

// decode reads a delivery row out of a pgoutput tuple (text format).
//
// The columns that decide whether the row is due (status, attempts, next_attempt_at,
// updated_at) and the id are fixed-width or short, so PostgreSQL never stores them out of
// line; the others could in theory arrive as unchanged TOAST values. Such a tuple decodes
// with an error wrapping errUnchangedToast; the caller leaves that row to the sweeper.
func (d *tupleDecoder) decode(rel *relation, tuple *pglogrepl.TupleData) (deliveryRow, error) {
	var row deliveryRow
	if tuple == nil {
		return row, errors.New("no tuple")
	}
	text := func(name string, required bool) (string, bool, error) {
		i, ok := rel.columns[name]
		if !ok || i >= len(tuple.Columns) {
			if required {
				return "", false, fmt.Errorf("column %s missing from relation %s.%s", name, rel.namespace, rel.name)
			}
			return "", false, nil
		}
		c := tuple.Columns[i]
		switch c.DataType {
		case pglogrepl.TupleDataTypeText:
			return string(c.Data), true, nil
		case pglogrepl.TupleDataTypeNull:
			if required {
				return "", false, fmt.Errorf("column %s is null", name)
			}
			return "", false, nil
		case pglogrepl.TupleDataTypeToast:
			return "", false, fmt.Errorf("column %s: %w", name, errUnchangedToast)
		default:
			return "", false, fmt.Errorf("column %s: unexpected tuple data type %q", name, c.DataType)
		}
	}

	var err error
	var s string
	if row.ID, _, err = text("id", true); err != nil {
		return row, err
	}
	if s, _, err = text("status", true); err != nil {
		return row, err
	}
	row.Status = herald.Status(s)
	if row.Status != herald.StatusPending {
		// Not due whatever its times say: herald's own updates of a row (QUEUED, SENDING, the
		// outcome), most of what the stream reads, end here without parsing a timestamp.
		return row, nil
	}
	if s, _, err = text("attempts", true); err != nil {
		return row, err
	}
	if row.Attempts, err = strconv.Atoi(s); err != nil {
		return row, fmt.Errorf("column attempts: %w", err)
	}
	if s, _, err = text("next_attempt_at", true); err != nil {
		return row, err
	}
	if row.NextAttemptAt, err = d.timestamptz(s); err != nil {
		return row, fmt.Errorf("column next_attempt_at: %w", err)
	}
	if s, _, err = text("updated_at", true); err != nil {
		return row, err
	}
	if row.UpdatedAt, err = d.timestamptz(s); err != nil {
		return row, fmt.Errorf("column updated_at: %w", err)
	}
	if !row.due() {
		return row, nil // the remaining columns are only needed to publish
	}
	if row.NotificationID, _, err = text("notification_id", true); err != nil {
		return row, err
	}
	if s, _, err = text("channel", true); err != nil {
		return row, err
	}
	row.Channel = herald.Channel(s)
	if s, _, err = text("priority", true); err != nil {
		return row, err
	}
	if row.Priority, err = herald.ParsePriority(s); err != nil {
		return row, fmt.Errorf("column priority: %w", err)
	}
	if row.Traceparent, _, err = text("traceparent", false); err != nil {
		return row, err
	}
	return row, nil
}

// timestamptz parses PostgreSQL's text output of a timestamptz. The replication session runs
// with DateStyle ISO, so pgtype's parser applies. infinity and -infinity map to the far
// future and the far past so that comparisons keep their meaning.
func (d *tupleDecoder) timestamptz(s string) (time.Time, error) {
	var ts pgtype.Timestamptz
	if err := d.types.Scan(pgtype.TimestamptzOID, pgtype.TextFormatCode, []byte(s), &ts); err != nil {
		return time.Time{}, err
	}
	switch ts.InfinityModifier {
	case pgtype.Infinity:
		return time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), nil
	case pgtype.NegativeInfinity:
		return time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), nil
	}
	if !ts.Valid {
		return time.Time{}, errors.New("null timestamp")
	}
	return ts.Time, nil
}

// parseWAL parses one pgoutput message. pglogrepl indexes into the payload without checking
// its length on some paths; a malformed message must end the session with an error, not
// crash the process.
func parseWAL(data []byte) (msg pglogrepl.Message, err error) {
	if len(data) == 0 {
		return nil, errors.New("empty pgoutput message")
	}
	defer func() {
		if p := recover(); p != nil {
			msg, err = nil, fmt.Errorf("malformed pgoutput message %q: %v", data[0], p)
		}
	}()
	return pglogrepl.Parse(data)
}
