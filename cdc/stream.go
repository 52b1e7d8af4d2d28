package cdc

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/tracelog"
)

// stream is one replication session. Its run method is the only goroutine that touches the
// replication connection: it receives WAL, hands due rows to Kafka and sends the standby
// status updates, so that receive and acknowledgement can never race.
type stream struct {
	cfg    Config
	conn   *pgconn.PgConn
	pub    *publisher
	marker *marker
	log    *zap.Logger

	tracker   *lsnTracker
	dec       *tupleDecoder
	relations map[uint32]*relation

	inFlight atomic.Int64  // this stream's records not yet acknowledged
	acked    chan struct{} // capacity 1: "a record was acknowledged"
	failure  atomic.Pointer[error]

	// The transaction being decoded.
	cur        *txn
	commitLSN  pglogrepl.LSN
	commitTime time.Time
	sentAt     time.Time // when the walsender sent the transaction's BEGIN (its clock)
	receivedAt time.Time

	// started, when set, is called once the server has accepted START_REPLICATION.
	started func()
}

// newStream prepares a session that resumes at start, the slot's confirmed_flush_lsn. The
// tracker never confirms anything below it: PostgreSQL 15 would move the slot backwards.
func newStream(cfg Config, conn *pgconn.PgConn, start pglogrepl.LSN, pub *publisher, mk *marker, log *zap.Logger) *stream {
	return &stream{
		cfg: cfg, conn: conn, pub: pub, marker: mk, log: log,
		tracker:   newLSNTracker(start),
		dec:       newTupleDecoder(),
		relations: map[uint32]*relation{},
		acked:     make(chan struct{}, 1),
	}
}

// run streams until ctx ends or the session fails. On cancellation it stops reading, waits up
// to ShutdownTimeout for Kafka to acknowledge what is in flight and sends a last status
// update; whatever is not acknowledged by then is sent again by the next leader.
func (s *stream) run(ctx context.Context) error {
	err := pglogrepl.StartReplication(ctx, s.conn, s.cfg.Slot, s.tracker.confirmed, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '1'", "publication_names '" + s.cfg.Publication + "'"},
	})
	if err != nil {
		return fmt.Errorf("start replication on slot %s: %w", s.cfg.Slot, err)
	}
	s.log.Info("streaming", zap.String("publication", s.cfg.Publication),
		zap.Stringer("start_lsn", s.tracker.confirmed))
	if s.started != nil {
		s.started()
	}

	nextStatus := time.Now().Add(s.cfg.StatusInterval)
	awaitingReply := false
	for {
		if err := s.failed(); err != nil {
			return err
		}
		if !time.Now().Before(nextStatus) {
			// When idle, ask the server for a keepalive: its WAL end is what lets a quiet
			// delivery table confirm past the WAL other tables write.
			awaitingReply = s.tracker.idle()
			if err := s.sendStatus(awaitingReply); err != nil {
				return err
			}
			nextStatus = time.Now().Add(s.cfg.StatusInterval)
		}

		if s.inFlight.Load() >= int64(s.cfg.MaxInFlight) || s.marker.backlog.Load() >= int64(s.cfg.MaxUnmarked) {
			// Kafka or the marker pushes back: stop reading WAL, keep the session alive with
			// status updates.
			if err := s.waitForAcks(ctx, nextStatus); err != nil {
				return s.shutdown(ctx, err)
			}
			continue
		}

		rctx, cancel := context.WithDeadline(ctx, nextStatus)
		msg, err := s.conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return s.shutdown(ctx, ctx.Err())
			}
			if pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("receive on slot %s: %w", s.cfg.Slot, err)
		}
		replyNow, err := s.handle(msg)
		if err != nil {
			return err
		}
		if replyNow || awaitingReply && s.keepaliveSeen(msg) {
			awaitingReply = false
			if err := s.sendStatus(false); err != nil {
				return err
			}
			nextStatus = time.Now().Add(s.cfg.StatusInterval)
		}
	}
}

// handle processes one message from the server and reports whether the server asked for an
// immediate reply.
func (s *stream) handle(msg pgproto3.BackendMessage) (bool, error) {
	switch m := msg.(type) {
	case *pgproto3.CopyData:
		if len(m.Data) == 0 {
			return false, errors.New("empty CopyData message")
		}
		switch m.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
			if err != nil {
				return false, fmt.Errorf("parse keepalive: %w", err)
			}
			s.tracker.keepalive(ka.ServerWALEnd)
			return ka.ReplyRequested, nil
		case pglogrepl.XLogDataByteID:
			xld, err := pglogrepl.ParseXLogData(m.Data[1:])
			if err != nil {
				return false, fmt.Errorf("parse XLogData: %w", err)
			}
			return false, s.handleWAL(xld.WALData, xld.ServerTime)
		}
		return false, nil
	case *pgproto3.ErrorResponse:
		return false, fmt.Errorf("replication on slot %s: %w", s.cfg.Slot, pgconn.ErrorResponseToPgError(m))
	case *pgproto3.CopyDone:
		return false, fmt.Errorf("replication on slot %s: server ended the stream", s.cfg.Slot)
	}
	return false, nil
}

func (s *stream) keepaliveSeen(msg pgproto3.BackendMessage) bool {
	m, ok := msg.(*pgproto3.CopyData)
	return ok && len(m.Data) > 0 && m.Data[0] == pglogrepl.PrimaryKeepaliveMessageByteID
}

// handleWAL decodes one pgoutput message (protocol version 1: whole transactions, in commit
// order, each between BEGIN and COMMIT); sent is when the walsender sent it (its header).
func (s *stream) handleWAL(data []byte, sent time.Time) error {
	if s.cur != nil && len(data) > 0 && data[0] == byte(pglogrepl.MessageTypeUpdate) && droppable(data[1:], s.relations) {
		return nil
	}
	lm, err := parseWAL(data)
	if err != nil {
		return fmt.Errorf("parse pgoutput message: %w", err)
	}
	switch m := lm.(type) {
	case *pglogrepl.RelationMessage:
		s.relations[m.RelationID] = newRelation(m)
	case *pglogrepl.BeginMessage:
		if s.cur != nil {
			return fmt.Errorf("BEGIN of xid %d inside another transaction", m.Xid)
		}
		s.cur = s.tracker.begin()
		s.commitLSN, s.commitTime, s.sentAt, s.receivedAt = m.FinalLSN, m.CommitTime, sent, time.Now()
		if s.cfg.ObserveLag != nil {
			s.cfg.ObserveLag(s.receivedAt.Sub(s.commitTime))
		}
	case *pglogrepl.CommitMessage:
		if s.cur == nil {
			return fmt.Errorf("COMMIT at %s outside a transaction", m.CommitLSN)
		}
		s.tracker.commit(m.TransactionEndLSN)
		s.cur = nil
	case *pglogrepl.InsertMessage:
		return s.handleTuple(m.RelationID, m.Tuple, true)
	case *pglogrepl.UpdateMessage:
		return s.handleTuple(m.RelationID, m.NewTuple, false)
	}
	return nil
}

// handleTuple hands a delivery row that is due, or an inserted status event, to Kafka.
func (s *stream) handleTuple(relID uint32, tuple *pglogrepl.TupleData, insert bool) error {
	if s.cur == nil {
		return errors.New("row change outside a transaction")
	}
	rel, ok := s.relations[relID]
	if !ok {
		return fmt.Errorf("row change for unknown relation %d", relID)
	}
	switch {
	case rel.name == deliveryTable:
		return s.handleDelivery(rel, tuple)
	case rel.name == eventTable && insert:
		return s.handleEvent(rel, tuple)
	}
	return nil
}

// handleEvent publishes a status event. Its transaction stays unconfirmed until Kafka has
// the event, as for a delivery record. An event the relay cannot read ends the session:
// unlike a delivery row, no sweeper would publish it later, and the slot must not move past
// it.
func (s *stream) handleEvent(rel *relation, tuple *pglogrepl.TupleData) error {
	e, err := s.dec.decodeEvent(rel, tuple)
	if err != nil {
		return fmt.Errorf("decode status event at commit %s: %w", s.commitLSN, err)
	}
	s.pub.metrics.eventWritten(e.Type)
	t := s.cur
	t.pending.Add(1)
	s.inFlight.Add(1)
	s.pub.publishEvent(e, func(err error) {
		if err != nil {
			s.failure.CompareAndSwap(nil, &err)
		} else {
			t.pending.Add(-1)
		}
		s.inFlight.Add(-1)
		select {
		case s.acked <- struct{}{}:
		default:
		}
	})
	return nil
}

// handleDelivery publishes a delivery row if it is due.
func (s *stream) handleDelivery(rel *relation, tuple *pglogrepl.TupleData) error {
	row, err := s.dec.decode(rel, tuple)
	if err != nil {
		// A row the relay cannot read is not lost: if it is PENDING and due, the sweeper
		// publishes it after the grace period.
		s.log.Error("cannot decode delivery row; leaving it to the sweeper",
			tracelog.Traceparent(row.Traceparent, row.ID), zap.Stringer("commit_lsn", s.commitLSN), zap.Error(err))
		return nil
	}
	if !row.due() {
		return nil
	}
	t := s.cur
	t.pending.Add(1)
	s.inFlight.Add(1)
	s.pub.publish(row, origin{source: sourceStream, commitLSN: s.commitLSN, commitTime: s.commitTime, sentAt: s.sentAt, receivedAt: s.receivedAt}, func(err error) {
		if err != nil {
			// t stays pending, so nothing at or after it is ever confirmed; the session
			// ends and the next one starts again from the last confirmed position.
			s.failure.CompareAndSwap(nil, &err)
		} else {
			s.marker.add(row)
			t.pending.Add(-1)
		}
		s.inFlight.Add(-1)
		select {
		case s.acked <- struct{}{}:
		default:
		}
	})
	return nil
}

func (s *stream) failed() error {
	if p := s.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// waitForAcks blocks until a record is acknowledged, the marker settles rows, the next
// status update is due, or ctx ends.
func (s *stream) waitForAcks(ctx context.Context, until time.Time) error {
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.acked:
	case <-s.marker.settled:
	case <-timer.C:
	}
	return nil
}

// sendStatus confirms the tracker's position: write = flush = apply.
func (s *stream) sendStatus(replyRequested bool) error {
	lsn := s.tracker.advance()
	if lsn == 0 {
		return nil // nothing known yet; 0 would mean "no position" to the server anyway
	}
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), s.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: lsn,
		WALFlushPosition: lsn,
		WALApplyPosition: lsn,
		ReplyRequested:   replyRequested,
	})
	if err != nil {
		return fmt.Errorf("send status update at %s on slot %s: %w", lsn, s.cfg.Slot, err)
	}
	if ce := s.log.Check(zap.DebugLevel, "status update"); ce != nil {
		ce.Write(zap.Stringer("lsn", lsn), zap.Int64("in_flight", s.inFlight.Load()),
			zap.Int("waiting_txns", s.tracker.waiting()), zap.Bool("reply_requested", replyRequested))
	}
	return nil
}

// shutdown drains the records in flight for up to ShutdownTimeout and confirms what Kafka
// acknowledged. It returns cause.
func (s *stream) shutdown(ctx context.Context, cause error) error {
	deadline := time.Now().Add(s.cfg.ShutdownTimeout)
	for s.inFlight.Load() > 0 && s.failed() == nil && time.Now().Before(deadline) {
		_ = s.waitForAcks(context.WithoutCancel(ctx), deadline)
	}
	if err := s.sendStatus(false); err != nil {
		s.log.Warn("last status update failed", zap.Error(err))
	}
	return cause
}
