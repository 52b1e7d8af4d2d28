package delivery

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// QueryGeneric runs sql, a statement whose plan holds the same partitions whatever its
// arguments (a day's statement, its bounds constants in its text), prepared and on its
// generic plan, and hands its rows to scan, which reads them all. PostgreSQL's own choice
// between a prepared statement's generic plan and a plan for each call's values compares
// their estimated costs, and for id = ANY($1) the generic plan's estimate assumes more ids
// than a batch of one holds: once a day's partition has statistics it kept planning every
// call (12 custom plans of 12 executions, docs/dispatch.md, "The claim and the read without
// planning"). The statement therefore runs in a transaction of its own that sets
// plan_cache_mode for itself alone: BEGIN, SET LOCAL, the statement, COMMIT, sent together
// in one round trip (a pgx batch), one commit as before. Inside a caller's transaction (db a
// pgx.Tx) the statement runs as it is, and PostgreSQL chooses.
func QueryGeneric(ctx context.Context, db DB, sql string, args []any, scan func(pgx.Rows) error) error {
	if _, inTx := db.(pgx.Tx); inTx {
		rows, err := db.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		return scanAll(rows, scan)
	}
	err := queryGenericTx(ctx, db, sql, args, scan)
	if _, pool := db.(*pgxpool.Pool); err != nil && !pool {
		// A failed statement leaves its transaction open and aborted (the COMMIT after it was
		// skipped): end it, or the connection refuses everything after. A pool's connection in
		// that state is closed when the batch gives it back.
		_, _ = db.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	return err
}

// queryGenericTx sends QueryGeneric's transaction as one batch.
func queryGenericTx(ctx context.Context, db DB, sql string, args []any, scan func(pgx.Rows) error) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL plan_cache_mode = force_generic_plan")
	b.Queue(sql, args...)
	b.Queue("COMMIT")
	br := db.SendBatch(ctx, b)
	defer br.Close()
	for _, step := range []string{"begin", "set plan_cache_mode"} {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("%s: %w", step, err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	if err := scanAll(rows, scan); err != nil {
		return err
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return br.Close()
}

// scanAll hands rows to scan and closes them; the first error of either is returned.
func scanAll(rows pgx.Rows, scan func(pgx.Rows) error) error {
	err := scan(rows)
	rows.Close()
	if err != nil {
		return err
	}
	return rows.Err()
}
