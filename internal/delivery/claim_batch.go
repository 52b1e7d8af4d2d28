package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Seen is a delivery as a worker read it: the attempt count a claim compares against.
type Seen struct {
	ID       string
	Attempts int
}

// Claimed is one delivery a batch claim took: its attempt number and the attempt's
// started_at (the database's now()).
type Claimed struct {
	Attempt   int
	StartedAt time.Time
}

// claimSQL takes deliveries for one attempt each, in one statement and one commit: each row
// only from PENDING or QUEUED (a worker may see the row before the relay marked it QUEUED),
// only at the attempt count read for it (per row, through unnest), only if due and not
// expired by the database clock. Exactly one worker can win a row; the winner alone calls the
// provider. The attempt's started_at is the returned now(). The lock is taken in the CTE and
// the compare-and-set repeated in the UPDATE, which sees the locked, newest version. Ids
// travel as text and are cast, as in markQueuedSQL.
//
// locked is how rows another transaction holds are treated. A batch of many skips them (SKIP
// LOCKED): it never holds some rows while it waits for others, so it cannot deadlock with the
// relay's or the reaper's batches; a skipped row is simply not claimed, and its caller claims
// it alone. A batch of one waits for the lock: holding no other row, it cannot deadlock.
//
// Both reads of delivery also say d.id = ANY($1): run on a custom plan (ClaimBatch), the array
// is a constant when PostgreSQL plans the statement, which then holds the partitions of the
// ids' days only, not every day's (a join on unnest alone prunes nothing).
func claimSQL(locked string) string {
	return `
WITH c AS (
    SELECT d.id, v.attempts
      FROM delivery AS d
      JOIN unnest($1::text[], $2::int[]) AS v(id, attempts) ON d.id = v.id::uuid
     WHERE d.id = ANY($1::text[]::uuid[]) AND d.status IN ('PENDING', 'QUEUED') AND d.attempts = v.attempts
       FOR UPDATE OF d` + locked + `)
UPDATE delivery AS d SET status = 'SENDING', attempts = d.attempts + 1
  FROM c
 WHERE d.id = ANY($1::text[]::uuid[]) AND d.id = c.id AND d.status IN ('PENDING', 'QUEUED') AND d.attempts = c.attempts
   AND d.next_attempt_at <= now() AND (d.expires_at IS NULL OR d.expires_at > now())
RETURNING d.id::text, d.attempts, now()`
}

var (
	claimBatchSQL = claimSQL(" SKIP LOCKED") // a batch of many
	claimOneSQL   = claimSQL("")             // a batch of one
)

// ClaimBatch moves the deliveries of seen to SENDING, each at the attempt count it was read
// with (claimSQL), and returns those it took by id. A delivery missing from the result was
// changed by another worker, the relay or the reaper, was not due, had expired, or (in a
// batch of many) was locked at that moment. Each id may appear once. The statement goes unnamed
// (pgx.QueryExecModeExec), which PostgreSQL plans for the values at hand on every call: a
// generic plan cannot prune by id = ANY($1).
func ClaimBatch(ctx context.Context, db DB, seen []Seen) (map[string]Claimed, error) {
	out := make(map[string]Claimed, len(seen))
	if len(seen) == 0 {
		return out, nil
	}
	sql := claimBatchSQL
	if len(seen) == 1 {
		sql = claimOneSQL
	}
	rows, err := db.Query(ctx, sql, claimBatchArgs(seen)...)
	if err != nil {
		return nil, fmt.Errorf("claim %d deliveries (first %s): %w", len(seen), seen[0].ID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var c Claimed
		if err := rows.Scan(&id, &c.Attempt, &c.StartedAt); err != nil {
			return nil, fmt.Errorf("claim %d deliveries: scan: %w", len(seen), err)
		}
		out[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim %d deliveries (first %s): %w", len(seen), seen[0].ID, err)
	}
	return out, nil
}

// claimBatchArgs are the arguments of claimBatchSQL for seen, the execution mode first.
func claimBatchArgs(seen []Seen) []any {
	ids := make([]string, len(seen))
	attempts := make([]int32, len(seen))
	for i, s := range seen {
		ids[i], attempts[i] = s.ID, int32(s.Attempts)
	}
	return []any{pgx.QueryExecModeExec, ids, attempts}
}
