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

// HighReserve is the admission reserve of HIGH that Config gives an API whose pool has
// poolConns connections: the size HighPool's pool wants.
func (c Config) HighReserve(poolConns int) int {
	return c.withDefaults(poolConns).AdmissionHighReserve
}

// poolFor is the pool of a POST of priority p.
func (a *API) poolFor(p herald.Priority) *pgxpool.Pool {
	if p == herald.PriorityHigh && a.highPool != nil {
		return a.highPool
	}
	return a.pool
}
