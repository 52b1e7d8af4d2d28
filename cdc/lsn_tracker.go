package cdc

import (
	"sync/atomic"

	"github.com/jackc/pglogrepl"
)

// txn is one decoded transaction whose records may still be on their way to Kafka.
// pending is decremented from Kafka's acknowledgement callbacks; everything else belongs to
// the stream goroutine.
type txn struct {
	pending atomic.Int64 // records handed to Kafka and not yet acknowledged
	endLSN  pglogrepl.LSN
}

// lsnTracker decides which WAL position the relay may confirm to PostgreSQL. Confirming a
// position tells the server it never has to send what lies before it again, so it is only
// ever the end of the longest prefix of transactions whose records Kafka has all
// acknowledged — never a position inside or after a transaction still in flight.
//
// It is owned by the stream goroutine and not safe for concurrent use, except for
// txn.pending.
type lsnTracker struct {
	open      *txn   // between BEGIN and COMMIT
	queue     []*txn // committed, in commit order, some records possibly unacknowledged
	confirmed pglogrepl.LSN
}

func newLSNTracker(start pglogrepl.LSN) *lsnTracker { return &lsnTracker{confirmed: start} }

// begin opens a transaction. A BEGIN while another is open is a protocol violation the
// caller reports; the tracker just replaces it.
func (t *lsnTracker) begin() *txn {
	t.open = &txn{}
	return t.open
}

// commit closes the open transaction at its end LSN (CommitMessage.TransactionEndLSN).
func (t *lsnTracker) commit(end pglogrepl.LSN) {
	x := t.open
	t.open = nil
	if x == nil {
		return
	}
	x.endLSN = end
	t.queue = append(t.queue, x)
	t.advance()
}

// advance moves the confirmed position over every leading transaction that is fully
// acknowledged and returns it.
func (t *lsnTracker) advance() pglogrepl.LSN {
	n := 0
	for n < len(t.queue) && t.queue[n].pending.Load() == 0 {
		if t.queue[n].endLSN > t.confirmed {
			t.confirmed = t.queue[n].endLSN
		}
		n++
	}
	if n > 0 {
		clear(t.queue[:n])
		t.queue = t.queue[n:]
	}
	return t.confirmed
}

// idle reports whether nothing is open or waiting for Kafka.
func (t *lsnTracker) idle() bool {
	t.advance()
	return t.open == nil && len(t.queue) == 0
}

// keepalive takes the server's WAL end from a keepalive message. When nothing is in flight
// every change before that position has been received and acknowledged (the server sends
// in order), so it may be confirmed: a quiet delivery table does not pin WAL that other
// tables write.
func (t *lsnTracker) keepalive(walEnd pglogrepl.LSN) {
	if t.idle() && walEnd > t.confirmed {
		t.confirmed = walEnd
	}
}

// waiting returns the number of committed transactions still waiting for Kafka.
func (t *lsnTracker) waiting() int {
	t.advance()
	return len(t.queue)
}
