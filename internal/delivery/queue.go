package delivery

import (
	"context"
	"fmt"
	"time"
)

// Version is one written version of a delivery row, as the relay saw it in the WAL or read it
// from the table: enough to tell it from every later version.
type Version struct {
	ID            string
	Attempts      int
	NextAttemptAt time.Time
	UpdatedAt     time.Time
}

// markQueuedSQL moves published rows from PENDING to QUEUED, each only if it is still the
// version that was published: same status, attempts, next_attempt_at and updated_at (the
// trigger sets updated_at on every write, and next_attempt_at tells apart two writes in one
// transaction). A worker that claimed the row first, or any later write, makes the row not
// match, and the row is left alone — the relay never overwrites a newer state.
//
// next_attempt_at <= now() is implied by the equalities (the published version was due), and
// is spelled out because dispatch relies on it: a row a worker deferred into the future never
// turns QUEUED.
//
// One statement marks a whole batch: the versions travel as parallel arrays through unnest.
// Ids travel as text and are cast once, in unnest, so that the parameter encodes the same in
// every pgx mode.
//
// The CTE locks each row whose published version still matches, one primary-key probe per
// version under LATERAL (which fixes that order), and skips a row another transaction holds
// (SKIP LOCKED); the UPDATE then changes the rows it locked, by the array of their ids and
// nothing else (a condition on status would let the planner walk the partial index of
// PENDING rows instead of probing the ids), the lock keeping each row as the CTE saw it. A
// mark never waits for a row lock, so two marks of the same rows (the stream's and the
// sweeper's, each in its own order) cannot deadlock: with an UPDATE that took each row's
// lock as it came, they did, in otp-under-campaign, and the relay's session ended with the
// error (TestConcurrentMarksOfTheSameRowsDoNotDeadlock). A skipped row is not in the result,
// and the marker tries it again; by then its holder has usually moved it on (a claim, a
// cancel, the other mark), and the compare-and-set leaves it alone. Probing by primary key,
// a mark reads its own rows only: as a join planned on a guess of ten versions it read every
// PENDING row of every partition to probe them (TestBatchClaimAndOutcomeReadEachRowOnce).
// The version is compared with IS NOT DISTINCT FROM, which on these NOT NULL columns is the
// equality, because it is not an index condition: with status = 'PENDING' and
// next_attempt_at = v.next_attempt_at spelled as equalities, the planner could probe through
// the partial index of PENDING rows by next_attempt_at when the statistics had that column
// nearly unique, and a probe then read every row that shares the version's next_attempt_at: a
// campaign's lot or a backlog, one statement's now() (TestMarkOfALotReadsEachRowOnce; the
// relay drained 100,000 rows at 2,000 rows/s instead of 20,000). Without a condition on status
// no partial index applies, and the probe is the primary key's.
//
// The mark is bookkeeping: if a crash loses it, the row stays PENDING and the sweeper
// publishes it again. So its commit does not wait for its WAL flush, which keeps the relay's
// own commits off the disk's critical path that every delivery insert's commit shares: the
// UPDATE's condition sets synchronous_commit = off for the statement's own transaction
// (promptCondition), in the statement's one round trip.
const markQueuedSQL = `
WITH l AS (
    SELECT x.id
      FROM unnest($1::text[]::uuid[], $2::int[], $3::timestamptz[], $4::timestamptz[])
           AS v(id, attempts, next_attempt_at, updated_at)
     CROSS JOIN LATERAL (
           SELECT d.id FROM delivery AS d
            WHERE d.id = v.id
              AND (d.status, d.attempts, d.next_attempt_at, d.updated_at)
                  IS NOT DISTINCT FROM ('PENDING', v.attempts, v.next_attempt_at, v.updated_at)
              AND d.next_attempt_at <= now()
              FOR UPDATE OF d SKIP LOCKED) AS x)
UPDATE delivery AS d
   SET status = 'QUEUED'
 WHERE d.id = ANY(ARRAY(SELECT l.id FROM l)) AND ` + promptCondition + `
RETURNING d.id::text`

// MarkQueued marks the published versions QUEUED (markQueuedSQL) and returns the ids it
// changed. A version that no longer matches is left alone and missing from the result.
func MarkQueued(ctx context.Context, db DB, vs []Version) (map[string]struct{}, error) {
	if len(vs) == 0 {
		return map[string]struct{}{}, nil
	}
	changed := make(map[string]struct{}, len(vs))
	rows, err := db.Query(ctx, markQueuedSQL, markQueuedArgs(vs)...)
	if err != nil {
		return nil, fmt.Errorf("mark %d deliveries queued (first %s): %w", len(vs), vs[0].ID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("mark %d deliveries queued (first %s): %w", len(vs), vs[0].ID, err)
		}
		changed[id] = struct{}{}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mark %d deliveries queued (first %s): %w", len(vs), vs[0].ID, err)
	}
	return changed, nil
}

// markQueuedArgs are the arguments of markQueuedSQL for vs.
func markQueuedArgs(vs []Version) []any {
	ids := make([]string, len(vs))
	attempts := make([]int32, len(vs))
	next := make([]time.Time, len(vs))
	updated := make([]time.Time, len(vs))
	for i, v := range vs {
		ids[i], attempts[i], next[i], updated[i] = v.ID, int32(v.Attempts), v.NextAttemptAt, v.UpdatedAt
	}
	return []any{ids, attempts, next, updated}
}
