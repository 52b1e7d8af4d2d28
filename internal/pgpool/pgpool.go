// Package pgpool opens herald's PostgreSQL connection pools with the session settings that
// herald's statements are written for. Every pool herald opens comes from here.
package pgpool

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Configure sets herald's session settings on a connection configuration, as startup
// parameters (no extra round trip), unless the connection string already sets them:
//
//   - jit=off. herald's statements are short OLTP statements that touch a handful of rows.
//     PostgreSQL compiles a statement with LLVM when the planner's cost estimate passes
//     jit_above_cost (100,000 by default), and the estimate of dispatch's one-row read grows
//     with the partitions' row counts: while a campaign of 500,000 users was in the day's
//     partition, every read of one delivery took 240–400 ms of compilation for 0.5 ms of
//     execution (docs/benchmarks.md, "HIGH during a campaign").
func Configure(cfg *pgconn.Config) {
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	if _, set := cfg.RuntimeParams["jit"]; !set {
		cfg.RuntimeParams["jit"] = "off"
	}
}

// ByKey returns the session settings of the pools whose statements find their rows through
// an index, a probe per row of a batch or a range of a partial index: the relay's (the QUEUED
// mark, the sweeper, the reaper) and dispatch's (the read, the claim, the outcome). They are
// startup parameters, passed to New or NewConfig beside herald's own.
//
//   - enable_seqscan=off. A day's partition starts empty, and PostgreSQL keeps a prepared
//     statement's generic plan until something invalidates it (the partition's first
//     analyze, a vacuum or DDL on it): a plan made while the partition held a page or two
//     read it whole on every run as it grew, a sequential scan filtered by the batch's
//     array of ids (the relay's marks read 2.1 million rows in 267 scans before autovacuum
//     first analyzed the day's partition in the relay scenario;
//     TestBatchesProbeByPrimaryKeyOnAPartitionThatGrewUnderTheirPlans). Off, the planner
//     takes the cheapest plan that is not a sequential scan, whatever the partition's size;
//     a table with no usable index still gets its sequential scan. Dispatch's claim and
//     outcome bound their ids with constants and were not affected; for them the setting is
//     a precaution.
func ByKey() map[string]string { return map[string]string{"enable_seqscan": "off"} }

// GenericPlans returns the session settings of the pools whose statements are the same
// lookups and inserts by key on every call, whatever their arguments: the API's accepts (the
// read of the accept context, the insert of the notification and its deliveries). They are
// startup parameters, passed beside ByKey, whose enable_seqscan=off keeps the one plan away
// from a sequential scan of a table analyzed while it was empty.
//
//   - plan_cache_mode=force_generic_plan. PostgreSQL plans a prepared statement anew for each
//     call's values for its first five calls, then keeps its generic plan only if that plan's
//     estimated cost is not above the average of the custom ones, per session and until
//     something invalidates it. The accept's statements reach the day-partitioned tables,
//     whose planning costs more than their execution: planned on every call they took
//     PostgreSQL 782–812 µs of CPU per POST in the ingest scenario, on their generic plans
//     337–372 µs, and a session that once chose the custom plans kept them (a scenario run
//     landed on either; docs/benchmarks.md, "The ingest ratio is two ratios").
func GenericPlans() map[string]string {
	return map[string]string{"plan_cache_mode": "force_generic_plan"}
}

// ParseConfig parses a PostgreSQL URL or DSN into a pool configuration with herald's
// session settings (Configure).
func ParseConfig(connString string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	Configure(&cfg.ConnConfig.Config)
	return cfg, nil
}

// New opens a pool on connString with herald's session settings, the given extra settings
// (startup parameters; nil: none) and at most maxConns connections (0: pgxpool's default).
// A setting that connString gives itself wins over both, as for jit. It does not dial; the
// first query does.
func New(ctx context.Context, connString string, maxConns int32, settings ...map[string]string) (*pgxpool.Pool, error) {
	cfg, err := NewConfig(connString, maxConns, settings...)
	if err != nil {
		return nil, err
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// NewConfig is the configuration New opens its pool with, for a caller that sets more of it
// (MinConns) before opening the pool itself.
func NewConfig(connString string, maxConns int32, settings ...map[string]string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	fromURL := maps.Clone(cfg.ConnConfig.RuntimeParams)
	Configure(&cfg.ConnConfig.Config)
	for _, m := range settings {
		for k, v := range m {
			if _, set := fromURL[k]; !set {
				cfg.ConnConfig.RuntimeParams[k] = v
			}
		}
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	return cfg, nil
}

// Named names the sessions of cfg's pool: application_name, which pg_stat_activity, the
// server's log (%a) and pg_stat_statements' callers show, so that an operator can tell the
// API's sessions from dispatch's, the relay's and the expander's. A name the connection string
// sets is kept.
func Named(cfg *pgxpool.Config, name string) {
	if _, set := cfg.ConnConfig.RuntimeParams["application_name"]; !set && name != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = name
	}
}

// Warm opens n of pool's connections now, at once (pgxpool opens them on demand, and a
// connection's start-up, TCP, authentication and the session settings, is tens of
// milliseconds on a busy machine): each is held until every one is open, then released to
// the pool, which keeps them idle. n is capped at the pool's MaxConns. The error is the
// first connection's that failed; the others are opened all the same.
func Warm(ctx context.Context, pool *pgxpool.Pool, n int) error {
	n = min(n, int(pool.Config().MaxConns))
	conns := make([]*pgxpool.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { conns[i], errs[i] = pool.Acquire(ctx) })
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Release()
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
