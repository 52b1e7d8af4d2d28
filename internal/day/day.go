// Package day is the UTC calendar day of herald's daily partitions, and of the UUIDv7 ids
// whose first 48 bits (unix milliseconds) place a row in them: the day arithmetic that
// internal/partition names partitions with and internal/delivery bounds its statements
// with. It has no dependency on either.
package day

import (
	"encoding/binary"
	"time"

	"github.com/google/uuid"
)

// Day is a UTC calendar day: midnight UTC of it.
type Day time.Time

// Of returns the UTC day of t.
func Of(t time.Time) Day {
	y, m, d := t.UTC().Date()
	return Day(time.Date(y, m, d, 0, 0, 0, 0, time.UTC))
}

// OfID returns the UTC day in which a UUIDv7 was made (its first 48 bits are unix ms).
func OfID(id uuid.UUID) Day {
	return Of(time.UnixMilli(idMillis(id)))
}

func idMillis(id uuid.UUID) int64 {
	var b [8]byte
	copy(b[2:], id[:6])
	return int64(binary.BigEndian.Uint64(b[:]))
}

// ByDay groups ids (UUIDv7s in text) by the UTC day they were made: the ids of one group
// have their rows in the same day's partitions. An id that does not parse goes to the zero
// Day, whose partitions hold nothing.
func ByDay(ids []string) map[Day][]string {
	out := make(map[Day][]string, 1)
	for _, s := range ids {
		var d Day
		if id, err := uuid.Parse(s); err == nil {
			d = OfID(id)
		}
		out[d] = append(out[d], s)
	}
	return out
}

// Time is the day's midnight UTC.
func (d Day) Time() time.Time { return time.Time(d) }

// Add returns the day n days later.
func (d Day) Add(n int) Day { return Day(d.Time().AddDate(0, 0, n)) }

// Lower is the lowest UUIDv7 of the day: its midnight in unix ms, the rest zero. The day's
// partitions hold ids from Lower (inclusive) to the next day's Lower (exclusive); the SQL
// function herald_day_bound computes the same.
func (d Day) Lower() uuid.UUID {
	var id uuid.UUID
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(d.Time().UnixMilli()))
	copy(id[:6], b[2:])
	return id
}

// Suffix is the partition name suffix, YYYYMMDD.
func (d Day) Suffix() string { return d.Time().Format("20060102") }

func (d Day) String() string { return d.Time().Format(time.DateOnly) }

// Name is the name of table's partition of the day, e.g. delivery_20261130.
func (d Day) Name(table string) string { return table + "_" + d.Suffix() }
