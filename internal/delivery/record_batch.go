package delivery

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/day"
)

// Recording is one claimed attempt's outcome, for RecordBatch.
type Recording struct {
	ID        string
	Attempt   int
	StartedAt time.Time
	Outcome   Outcome
}

// recordBatchSQL writes the outcomes of claimed attempts, one or many, in one statement and
// one commit: a conditional UPDATE on (id, SENDING, attempt) per row, and one attempt row for
// each row it matched — atomic, and one round trip after the provider calls. A late worker
// (its row reaped and re-claimed) matches nothing and writes nothing, so it can never
// overwrite a newer state. The outcomes travel as parallel arrays through unnest; the new
// status picks, per row, which columns change: SENT sets sent_at, the provider and its message
// id and clears last_error; PENDING (a retry) goes back to PENDING (or CANCELLED, see
// backToPending) due retry_secs from now(), and the attempt row keeps that time; FAILED (a
// permanent error, or the last allowed attempt failed) and EXPIRED (the claim expired before
// the provider was called) keep the error.
//
// The UPDATE finds each delivery from its outcome, one primary-key probe per outcome in a
// nested loop driven by o. o's condition, set_config(…) = 'statement', is always true, and
// PostgreSQL estimates an equality on an expression at 0.5 %: o counts as one row on any
// plan, so that driving the loop from o is the cheapest order it sees. When o counted as
// ten (a generic plan's guess for an array) and the deliveries found by id = ANY($1) as one,
// it drove the loop from the deliveries and rescanned o once per delivery: a batch of 64 read
// 4,096 rows of o, half the statement's time at 100 (TestBatchClaimAndOutcomeReadEachRowOnce).
// The attempt rows take o's values from d's RETURNING, not from a second join.
//
// The statement reads delivery by d.id = o.id (and d.id = ANY($1) when unbounded) and the
// notifications of a retry's campaign check (backToPending) between lo and hi: from the day
// before the lowest id's ($12) to the day of the highest id's ($13) (a delivery is made with
// its notification, so its id is not earlier and lies at most a midnight later;
// herald_day_bound and herald_uuid_day are partition.Day's arithmetic in SQL). Run on a custom plan (RecordBatch), every one of these
// is a constant when PostgreSQL plans the statement, which then holds the partitions of the
// ids' days only. Outcomes of ids of one day run that day's text instead (recordStatement):
// within bounds d.id to the day with constants, lo and hi are constants too, so that its
// generic plan holds the same partitions, and it is prepared once per connection, as the
// claim is (claimSQL).
//
// A day's statement is planned once per connection only for one outcome: recordOneSQL, whose
// outcome is a row of scalars. PostgreSQL, left to choose, plans a prepared statement anew
// while the generic plan costs more than the custom ones, and unnest's row estimate is the
// array's length on a custom plan but 100 on the generic one, so the statement of arrays, at
// the one or few outcomes a provider-paced lane records at a time, was planned on 7,508 of
// 11,133 calls at 0.73 ms each against its 1.2 ms of execution (docs/dispatch.md, "The
// outcome without planning"). Scalars estimate one row on either plan, and the generic one wins.
func recordSQL(within, lo, hi string) string {
	return recordSQLOf(`
    SELECT * FROM unnest($1::text[]::uuid[], $2::int[], $3::timestamptz[], $4::text[], $5::text[], $6::text[],
                         $7::text[], $8::text[], $9::text[], $10::float8[], $11::int[])`,
		within, lo, hi)
}

// recordOneSQL is recordSQL for one outcome: its values are scalars ($1 … $11).
func recordOneSQL(within, lo, hi string) string {
	return recordSQLOf(`
    SELECT * FROM (VALUES ($1::text::uuid, $2::int, $3::timestamptz, $4::text, $5::text, $6::text,
                           $7::text, $8::text, $9::text, $10::float8, $11::int))`,
		within, lo, hi)
}

// recordSQLOf is the outcome statement whose outcomes are the rows of outcomes, each
// delivery found by its outcome's id within bounds (by d.id = ANY($1) too when within is
// empty). Its CTE e writes the event of each send (sentEventsSQL); o's set_config tells the
// status trigger so, before any row changes.
func recordSQLOf(outcomes, within, lo, hi string) string {
	return `
WITH o AS (` + outcomes + `
        AS o(id, attempt, started_at, status, outcome, error, provider, provider_code, provider_message_id, retry_secs,
             tokens_removed)
     WHERE set_config('herald.outcome_events', 'statement', true) = 'statement'),
d AS (
    UPDATE delivery AS d
       SET status = CASE WHEN o.status = 'PENDING' THEN ` + backToPendingWithin("d", lo, hi) + ` ELSE o.status END,
           sent_at = CASE WHEN o.status = 'SENT' THEN now() ELSE d.sent_at END,
           provider = CASE o.status WHEN 'SENT' THEN o.provider WHEN 'EXPIRED' THEN d.provider
                                    ELSE coalesce(o.provider, d.provider) END,
           provider_message_id = CASE WHEN o.status = 'SENT' THEN o.provider_message_id ELSE d.provider_message_id END,
           last_error = CASE WHEN o.status = 'SENT' THEN NULL ELSE o.error END,
           next_attempt_at = CASE WHEN o.status = 'PENDING' THEN now() + make_interval(secs => o.retry_secs)
                                  ELSE d.next_attempt_at END
      FROM o
     WHERE d.id = o.id` + boundOrAny(within) + ` AND d.status = 'SENDING' AND d.attempts = o.attempt
    RETURNING d.id, d.attempts, d.status, d.next_attempt_at, d.redrive_id, d.notification_id, d.channel, d.priority,
              d.provider, d.provider_message_id, d.traceparent, o.started_at, o.outcome, o.error,
              o.provider AS attempt_provider, o.provider_code, o.tokens_removed),
e AS (` + sentEventsSQL(lo, hi) + `)
INSERT INTO delivery_attempt (delivery_id, attempt, redrive_id, started_at, outcome, error, provider, provider_code, next_attempt_at,
                              tokens_removed)
SELECT d.id, d.attempts, d.redrive_id, d.started_at, d.outcome, d.error, d.attempt_provider, d.provider_code,
       CASE WHEN d.status = 'PENDING' THEN d.next_attempt_at END, d.tokens_removed
  FROM d
RETURNING delivery_id::text`
}

// recordBatchSQL is the statement for outcomes of ids of any days, planned for its values.
var recordBatchSQL = recordSQL("",
	`herald_day_bound(herald_uuid_day($12::text::uuid) - 1)`, `herald_day_bound(herald_uuid_day($13::text::uuid) + 1)`)

// recordByDay holds the outcome statements made for a day, by recordKey: two a day.
var recordByDay sync.Map

// recordKey names one day's outcome statement: of one outcome (recordOneSQL) or of many.
type recordKey struct {
	day day.Day
	one bool
}

// recordStatement is the statement that records outcomes and its arguments, from args as
// recordBatchArgs made them: a day's prepared statement when the lowest and the highest id
// are of one day (of one outcome, its values as scalars), else recordBatchSQL, unnamed.
func recordStatement(args []any) (string, []any) {
	of := day.OfID(uuid.MustParse(args[len(args)-2].(string)))
	if day.OfID(uuid.MustParse(args[len(args)-1].(string))) != of {
		return recordBatchSQL, args
	}
	args = append([]any{pgx.QueryExecModeCacheStatement}, args[1:len(args)-2]...)
	key := recordKey{day: of, one: len(args[1].([]string)) == 1}
	if key.one {
		firstOfEach(args[1:])
	}
	if sql, ok := recordByDay.Load(key); ok {
		return sql.(string), args
	}
	statement := recordSQL
	if key.one {
		statement = recordOneSQL
	}
	sql, _ := recordByDay.LoadOrStore(key, statement(dayWithin("d", of),
		fmt.Sprintf("'%s'::uuid", of.Add(-1).Lower()), fmt.Sprintf("'%s'::uuid", of.Add(1).Lower())))
	return sql.(string), args
}

// firstOfEach replaces each of recordBatchArgs' arrays by its first value.
func firstOfEach(arrays []any) {
	for i, a := range arrays {
		switch a := a.(type) {
		case []string:
			arrays[i] = a[0]
		case []int32:
			arrays[i] = a[0]
		case []time.Time:
			arrays[i] = a[0]
		case []*string:
			arrays[i] = a[0]
		case []float64:
			arrays[i] = a[0]
		default:
			panic(fmt.Sprintf("record: an argument of type %T", a))
		}
	}
}

// RecordBatch writes the outcomes of rs (recordBatchSQL) and returns the ids whose outcome
// was recorded; an id missing from the result was no longer its attempt's. Each id may
// appear once. Outcomes of one day's ids run that day's prepared statement (recordStatement);
// others go unnamed (pgx.QueryExecModeExec), which PostgreSQL plans for the values at hand on
// every call: a generic plan of recordBatchSQL would hold every day's partitions.
func RecordBatch(ctx context.Context, db DB, rs []Recording) (map[string]struct{}, error) {
	out := make(map[string]struct{}, len(rs))
	if len(rs) == 0 {
		return out, nil
	}
	args, err := recordBatchArgs(rs)
	if err != nil {
		return nil, err
	}
	n := len(rs)
	// Not QueryGeneric: plan_cache_mode set for the transaction would also force generic plans
	// on what the statement sets off, the foreign-key check of its delivery_attempt rows and
	// the event triggers' probes by primary key of delivery and notification, and those plans
	// lock every partition of those tables (PostgreSQL locks a generic plan's partitions
	// before pruning them). The day's statement is prepared, and PostgreSQL chooses its plan.
	sql, args := recordStatement(args)
	rows, err := db.Query(ctx, sql, args...)
	if err == nil {
		err = scanAll(rows, func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return fmt.Errorf("scan: %w", err)
				}
				out[id] = struct{}{}
			}
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("record %d outcomes (first %s): %w", n, rs[0].ID, err)
	}
	return out, nil
}

// recordBatchArgs are the arguments of recordBatchSQL for rs, the execution mode first and
// the lowest and highest ids ($12, $13) last.
func recordBatchArgs(rs []Recording) ([]any, error) {
	n := len(rs)
	ids, statuses, classes := make([]string, n), make([]string, n), make([]string, n)
	attempts := make([]int32, n)
	started := make([]time.Time, n)
	errs, providers, codes, providerIDs := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	retry := make([]float64, n)
	tokens := make([]int32, n)
	seen := make(map[string]struct{}, n)
	var lo, hi uuid.UUID
	for i, r := range rs {
		switch r.Outcome.Status {
		case herald.StatusSent, herald.StatusPending, herald.StatusFailed, herald.StatusExpired:
		default:
			return nil, fmt.Errorf("record delivery %s attempt %d: unexpected status %s", r.ID, r.Attempt, r.Outcome.Status)
		}
		if _, dup := seen[r.ID]; dup {
			return nil, fmt.Errorf("record %d outcomes: delivery %s appears twice", n, r.ID)
		}
		seen[r.ID] = struct{}{}
		id, err := uuid.Parse(r.ID)
		if err != nil {
			return nil, fmt.Errorf("record delivery %s attempt %d: %w", r.ID, r.Attempt, err)
		}
		if i == 0 || bytes.Compare(id[:], lo[:]) < 0 {
			lo = id
		}
		if i == 0 || bytes.Compare(id[:], hi[:]) > 0 {
			hi = id
		}
		o := r.Outcome
		ids[i], attempts[i], started[i], statuses[i], classes[i] = r.ID, int32(r.Attempt), r.StartedAt, string(o.Status), string(o.AttemptClass)
		errs[i], providers[i], codes[i], providerIDs[i] = nullable(o.Error), nullable(o.Provider), nullable(o.ProviderCode), nullable(o.ProviderID)
		retry[i], tokens[i] = o.RetryIn.Seconds(), int32(o.TokensRemoved)
	}
	return []any{pgx.QueryExecModeExec, ids, attempts, started, statuses, classes,
		errs, providers, codes, providerIDs, retry, tokens, lo.String(), hi.String()}, nil
}

// sentEventsSQL writes the herald.delivery.sent event of every send the outcome statement
// recorded (its CTE d, the rows after the change with their outcomes' removed tokens): one
// INSERT for the whole batch, where the status trigger would route one INSERT per event into
// the partitioned outbox at commit. o's set_config told the trigger so for this transaction
// (migration 00140); every other client-visible change keeps the trigger's event. The data is
// the trigger's for a send (herald_write_event, delivery_status_event). The client is the
// notification's, looked up by primary key between lo and hi like the retry's campaign check,
// in a subquery: a join let the planner, counting one notification on a young partition's
// statistics, scan the whole range for every send.
func sentEventsSQL(lo, hi string) string {
	return `
    INSERT INTO delivery_event (id, type, client_id, notification_id, delivery_id, occurred_at, data, traceparent)
    SELECT herald_uuidv7(), 'herald.delivery.sent',
           (SELECT n.client_id FROM notification n
             WHERE n.id = d.notification_id AND n.id >= ` + lo + ` AND n.id < ` + hi + `),
           d.notification_id, d.id, now(),
           jsonb_build_object('notificationId', d.notification_id, 'deliveryId', d.id, 'channel', d.channel,
                              'priority', d.priority, 'status', d.status, 'attempt', d.attempts,
                              'sequence', nextval('delivery_event_sequence'), 'occurredAt', now())
           || jsonb_strip_nulls(jsonb_build_object('provider', d.provider, 'providerMessageId', d.provider_message_id,
                                                   'tokensRemoved', nullif(d.tokens_removed, 0))),
           d.traceparent
      FROM d
     WHERE d.status = 'SENT' AND herald_event_enabled()`
}
