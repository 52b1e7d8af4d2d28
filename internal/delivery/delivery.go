// Package delivery is the delivery state machine of herald (docs/architecture.md, "States"): every transition
// of a delivery row is one function here, with its SQL as a named constant right above it
// and its compare-and-set condition inside that SQL. ingest, internal/campaign, cdc, dispatch,
// internal/redrive and the tests call these functions; no other package writes a delivery's state.
//
//	Insert ──▶ PENDING ──MarkQueued──▶ QUEUED ──Claim──▶ SENDING ──Record──▶ SENT | FAILED | EXPIRED
//	              ▲  ▲                     │                 │
//	              │  └──── ReapQueued ─────┘                 ├──Record (retry), Unclaim──▶ PENDING
//	              └───────────── ReapSending ────────────────┘
//	PENDING ──Claim──▶ SENDING (a worker may read the record before the row is marked QUEUED)
//	PENDING ──ExpireDue──▶ EXPIRED          PENDING / QUEUED ──Expire──▶ EXPIRED
//	PENDING / QUEUED ──GiveUp──▶ FAILED     PENDING / QUEUED ──Cancel──▶ CANCELLED
//	FAILED / EXPIRED ──Redrive──▶ PENDING   (an operator's re-drive: the one move back)
//	SENDING ──RetryNow──▶ SENDING           (the next attempt, at once, on another account)
//
// A claim and an outcome are one statement for one row or many (ClaimBatch, RecordBatch; a
// single row is a batch of one, and Claim and Record say so for callers that have one row).
//
// Every write is a conditional UPDATE on the state the caller last saw (status, attempt
// number, and for the relay the exact row version): a late worker, a late relay or a late
// reaper matches nothing and changes nothing. Times that decide "due" and "expired" are the
// database's now(); the delivery_touch trigger sets updated_at on every write.
package delivery

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what a transition runs on: a *pgxpool.Pool, a *pgxpool.Conn, a *pgx.Conn or a
// pgx.Tx, so that a caller can make a transition part of a transaction of its own.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// nullable maps "" to SQL NULL.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
