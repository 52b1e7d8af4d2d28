package ingest

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldhq/herald"
)

// HighPool gives HIGH POSTs connections of their own: their accept (the read, the insert, a
// replay's read) runs on pool, and NORMAL and LOW on the API's pool. The admission reserve
// keeps slots for HIGH, but with one pool for all a HIGH request still queued for a
// connection behind the NORMAL and LOW requests already waiting for one (the pool's own
// queue), and, after a quiet spell, behind the opening of the connections a burst made the pool
// grow by: in the seed-load scenario, HIGH's "accept → context read" was p99 914 ms, most of it
// that queue. Size pool for HIGH's concurrency (HighReserve) and open its connections before
// serving (MinConns = MaxConns), so that a HIGH accept never opens one.
func HighPool(pool *pgxpool.Pool) Option {
	return func(a *API) { a.highPool = pool }
}

// AcceptPool gives NORMAL and LOW POSTs connections of their own: their accept (the read, the
// insert, a replay's read) runs on pool, every other route on the API's pool. The accept's
// statements are the same lookups and inserts by key on every call, which a pool opened with
// pgpool.GenericPlans and pgpool.ByKey plans once per session; the API's other statements
// (lists, re-drive selections, campaigns) keep PostgreSQL's own choice of plan for their
// values. Size pool for the admission's slots (Slots): no more POSTs than that do database
// work at once.
func AcceptPool(pool *pgxpool.Pool) Option {
	return func(a *API) { a.acceptPool = pool }
}

// Slots is the admission's slot count that Config gives an API whose pool has poolConns
// connections: the size AcceptPool's pool wants.
func (c Config) Slots(poolConns int) int {
	return c.withDefaults(poolConns).AdmissionSlots
}

// HighReserve is the admission reserve of HIGH that Config gives an API whose pool has
// poolConns connections: the size HighPool's pool wants.
func (c Config) HighReserve(poolConns int) int {
	return c.withDefaults(poolConns).AdmissionHighReserve
}

// poolFor is the pool of a POST of priority p.
func (a *API) poolFor(p herald.Priority) *pgxpool.Pool {
	switch {
	case p == herald.PriorityHigh && a.highPool != nil:
		return a.highPool
	case p != herald.PriorityHigh && a.acceptPool != nil:
		return a.acceptPool
	}
	return a.pool
}
