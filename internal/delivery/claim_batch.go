package delivery

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/day"
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
// provider. The attempt's started_at is the returned now(). Ids travel as text and are cast
// once, in unnest.
//
// The CTE locks the rows: for each (id, attempts) of the batch, a LATERAL subquery finds the
// row by primary key and locks it if it is claimable at that count. LATERAL fixes the order,
// one index probe per id. As a plain join the planner, counting one row for the deliveries
// found by id = ANY($1) on a generic plan, rescanned the batch's values once per delivery:
// a batch of 64 read 4,096 rows twice over, 70 % of the statement's time at 100
// (TestBatchClaimAndOutcomeReadEachRowOnce). The UPDATE then changes the rows the CTE locked,
// by the array of their ids, with no join at all; its condition is evaluated again on the
// newest version, which the lock keeps as the CTE saw it.
//
// locked is how rows another transaction holds are treated. A batch of many skips them (SKIP
// LOCKED): it never holds some rows while it waits for others, so it cannot deadlock with the
// relay's or the reaper's batches; a skipped row is simply not claimed, and its caller claims
// it alone. A batch of one waits for the lock: holding no other row, it cannot deadlock.
//
// within, when every id is of one UTC day, bounds both reads of delivery to that day's range
// of ids with constants (dayWithin). Bounded, the statement holds the day's partition only on
// any plan, so it is prepared once per connection and day and runs on a generic plan: nothing
// is planned per claim. Planning the statement, on a table of a partition per day, took
// 0.6–2.7 ms against its 0.3 ms of execution (docs/dispatch.md, "The claim and the read
// without planning"). Unbounded (ids of several days, rare), both reads say d.id = ANY($1)
// instead and the statement runs on a custom plan (ClaimBatch), where the array is a constant
// when PostgreSQL plans it and the partitions of the ids' days are the only ones held.
func claimSQL(locked, within string, prompt bool) string {
	bound := boundOrAny(within)
	return `
WITH c AS (
    SELECT l.id
      FROM unnest($1::text[]::uuid[], $2::int[]) AS v(id, attempts)
     CROSS JOIN LATERAL (
           SELECT d.id FROM delivery AS d
            WHERE d.id = v.id` + bound + ` AND d.status IN ('PENDING', 'QUEUED') AND d.attempts = v.attempts
              FOR UPDATE OF d` + locked + `) AS l)
UPDATE delivery AS d SET status = 'SENDING', attempts = d.attempts + 1
 WHERE d.id = ANY(ARRAY(SELECT c.id FROM c))` + bound + ` AND ` + claimable("d.attempts") + promptly(prompt) + `
RETURNING d.id::text, d.attempts, now()`
}

// claimable is the claim's compare-and-set on the newest version of delivery d, read with
// attempts attempts: PENDING or QUEUED at that count, due and not expired by the database
// clock.
func claimable(attempts string) string {
	return `d.status IN ('PENDING', 'QUEUED') AND d.attempts = ` + attempts + `
   AND d.next_attempt_at <= now() AND (d.expires_at IS NULL OR d.expires_at > now())`
}

// ClaimOneSQL is the claim of one delivery, $1 (its id as text) read with $2 attempts, as a
// statement of scalars for a caller to run as the data-modifying CTE of its own statement:
// dispatch reads the row and claims it in one round trip (docs/dispatch.md, "A first attempt
// claimed as it is read"). within bounds d.id as dayWithin does, with the caller's own
// constants. It returns the delivery's id, the claimed attempt (attempt) and its started_at
// (started_at, now()). A plain UPDATE waits for the row's lock as a batch of one does, and
// PostgreSQL's READ COMMITTED rule evaluates the compare-and-set again on the newest version
// once it has the lock. prompt: its commit does not wait for its WAL flush (promptCommit).
func ClaimOneSQL(within string, prompt bool) string {
	return `
UPDATE delivery AS d SET status = 'SENDING', attempts = d.attempts + 1
 WHERE d.id = $1::text::uuid` + within + ` AND ` + claimable("$2::int") + promptly(prompt) + `
RETURNING d.id, d.attempts AS attempt, now() AS started_at`
}

// promptCommit, added to a claim's WHERE, sets synchronous_commit = off for the statement's
// own transaction (set_config local to it, evaluated once as an InitPlan): the claim commits
// without waiting for its WAL flush, which under load is most of a commit's time (the
// flush of every other session's WAL before it). Rows it claimed are visible to every other
// session at once, as any commit's; only a crash of the database server in the next
// fraction of a second (wal_writer_delay) can lose the claim, which then reads as an attempt
// never started, and the delivery is sent again. That is what a crash during the provider
// call does to a lane whose policy retries an ambiguous outcome (RetryAmbiguous, HIGH's by
// default), so for such a lane the prompt claim promises no less (docs/dispatch.md, "The
// claim's commit"). The outcome after the call commits durably, and its flush takes the
// claim's WAL with it.
const promptCommit = `
   AND ` + promptCondition

// promptly is promptCommit for a prompt claim, else nothing.
func promptly(prompt bool) string {
	if prompt {
		return promptCommit
	}
	return ""
}

// promptCondition is true, and sets synchronous_commit = off for the transaction of the
// statement whose WHERE it is in (promptCommit, insertPromptSQL).
const promptCondition = `(SELECT set_config('synchronous_commit', 'off', true)) = 'off'`

const (
	skipLocked = " SKIP LOCKED" // a batch of many
	waitLocked = ""             // a batch of one
)

// claimUnbounded are the claims of ids of several days, by [prompt][one]: a batch of many
// or of one, on a custom plan.
var claimUnbounded = [2][2]string{
	{claimSQL(skipLocked, "", false), claimSQL(waitLocked, "", false)},
	{claimSQL(skipLocked, "", true), claimSQL(waitLocked, "", true)},
}

// claimStatement is the statement that claims seen and how it runs: bounded to the ids' day
// and prepared (the pool's statement cache) when they are of one day, else unbounded and
// unnamed. A day's statement text is made once.
func claimStatement(seen []Seen, prompt bool) (string, pgx.QueryExecMode) {
	locked := skipLocked
	if len(seen) == 1 {
		locked = waitLocked
	}
	of, ok := oneDay(seen)
	if !ok {
		return claimUnbounded[b2i(prompt)][b2i(len(seen) == 1)], pgx.QueryExecModeExec
	}
	key := claimKey{day: of, locked: locked, prompt: prompt}
	if sql, ok := claimByDay.Load(key); ok {
		return sql.(string), pgx.QueryExecModeCacheStatement
	}
	sql, _ := claimByDay.LoadOrStore(key, claimSQL(locked, dayWithin("d", of), prompt))
	return sql.(string), pgx.QueryExecModeCacheStatement
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// claimKey names one day's claim statement.
type claimKey struct {
	day    day.Day
	locked string
	prompt bool
}

// claimByDay holds the claim statements made for a day, by claimKey. A process makes at most
// four a day: a few hundred bytes each.
var claimByDay sync.Map

// oneDay is the UTC day of every id of seen; ok is false when they are of several days or an
// id does not parse.
func oneDay(seen []Seen) (of day.Day, ok bool) {
	for i, s := range seen {
		id, err := uuid.Parse(s.ID)
		if err != nil {
			return of, false
		}
		d := day.OfID(id)
		if i > 0 && d != of {
			return of, false
		}
		of = d
	}
	return of, true
}

// boundOrAny is within, or, when a batch's ids are of several days and within is empty,
// d.id = ANY($1): a constant on a custom plan, which keeps the plan to the ids' partitions.
func boundOrAny(within string) string {
	if within == "" {
		return ` AND d.id = ANY($1::text[]::uuid[])`
	}
	return within
}

// dayWithin is the condition that bounds alias.id to day's range of ids, as constants: a
// statement with it holds only day's partition, on any plan.
func dayWithin(alias string, of day.Day) string {
	return fmt.Sprintf(" AND %[1]s.id >= '%[2]s'::uuid AND %[1]s.id < '%[3]s'::uuid", alias, of.Lower(), of.Add(1).Lower())
}

// ClaimBatch moves the deliveries of seen to SENDING, each at the attempt count it was read
// with (claimSQL), and returns those it took by id. A delivery missing from the result was
// changed by another worker, the relay or the reaper, was not due, had expired, or (in a
// batch of many) was locked at that moment. Each id may appear once. Ids of one day go through
// that day's prepared statement (claimStatement); ids of several days through an unnamed one
// (pgx.QueryExecModeExec), which PostgreSQL plans for the values at hand: a generic plan
// cannot prune by id = ANY($1).
func ClaimBatch(ctx context.Context, db DB, seen []Seen) (map[string]Claimed, error) {
	return claimBatch(ctx, db, seen, false)
}

// ClaimBatchPrompt is ClaimBatch whose commit does not wait for its WAL flush
// (promptCommit): for the lanes whose policy retries an ambiguous outcome.
func ClaimBatchPrompt(ctx context.Context, db DB, seen []Seen) (map[string]Claimed, error) {
	return claimBatch(ctx, db, seen, true)
}

func claimBatch(ctx context.Context, db DB, seen []Seen, prompt bool) (map[string]Claimed, error) {
	out := make(map[string]Claimed, len(seen))
	if len(seen) == 0 {
		return out, nil
	}
	scan := func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			var c Claimed
			if err := rows.Scan(&id, &c.Attempt, &c.StartedAt); err != nil {
				return fmt.Errorf("scan: %w", err)
			}
			out[id] = c
		}
		return nil
	}
	sql, mode := claimStatement(seen, prompt)
	args := claimBatchArgs(seen)
	args[0] = mode
	if err := query(ctx, db, sql, args, scan); err != nil {
		return nil, fmt.Errorf("claim %d deliveries (first %s): %w", len(seen), seen[0].ID, err)
	}
	return out, nil
}

// query runs sql with args, its execution mode first: a day's statement (mode
// QueryExecModeCacheStatement) on its generic plan (QueryGeneric), any other unnamed, planned
// for its values; scan reads the rows.
func query(ctx context.Context, db DB, sql string, args []any, scan func(pgx.Rows) error) error {
	if args[0] == pgx.QueryExecModeCacheStatement {
		return QueryGeneric(ctx, db, sql, args[1:], scan)
	}
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	return scanAll(rows, scan)
}

// claimBatchArgs are the arguments of the claim for seen, the execution mode of the unbounded
// statement first.
func claimBatchArgs(seen []Seen) []any {
	ids := make([]string, len(seen))
	attempts := make([]int32, len(seen))
	for i, s := range seen {
		ids[i], attempts[i] = s.ID, int32(s.Attempts)
	}
	return []any{pgx.QueryExecModeExec, ids, attempts}
}
