package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/partition"
)

// A record of a first attempt that a pass takes alone (most of HIGH's, and every record of a
// quiet lane) goes a shorter way than the path's:
//
//	lease (one Redis round trip) → read and claim (one statement) → render → rate limit → call
//
// Its attempt is known before the read, the record's attempts + 1 = 1, and a first attempt
// has nothing the give-up rule could refuse: no attempt used, none ambiguous. So the lease is
// taken on the record's word, and the row is read and claimed by one statement: one round
// trip to PostgreSQL, and one statement to plan and commit, instead of two (docs/dispatch.md,
// "A first attempt claimed as it is read"). A claim that takes nothing leaves the row as the
// statement read it, and the record is decided on that read as on any other: a row sent
// already, a row not due, a read older than the record.

// claimReadSQL reads a delivery as loadDaySQL does and claims its first attempt in the same
// statement: $1 the id, $2 the attempts the record was made with. The read sees the row as the
// statement's snapshot holds it, before the claim; claim.attempt and claim.started_at are NULL when
// the claim took nothing.
func claimReadSQL(prompt bool) string {
	return `
WITH claim AS (` + delivery.ClaimOneSQL(loadWithin, prompt) + `)
SELECT ` + loadColumns + `,
       claim.attempt, claim.started_at` + loadFrom + `
LEFT JOIN claim ON claim.id = d.id
WHERE d.id = $1::text::uuid` + loadWithin
}

// claimReadSQLs are claimReadSQL's two texts, by prompt.
var claimReadSQLs = map[bool]string{false: claimReadSQL(false), true: claimReadSQL(true)}

// claimRead reads the delivery id and claims its first attempt, as made from a record of
// attempts attempts (claimReadSQL); id is canonical, as work.id. r is nil when the statement saw no row; ok says whether
// the claim took the row, and cl is then the claimed attempt. The day's statement is prepared
// once per connection; a statement of scalars, it runs on its generic plan after
// PostgreSQL's first five.
func claimRead(ctx context.Context, pool *pgxpool.Pool, id string, attempts int, prompt bool) (r *row, cl delivery.Claimed, ok bool, err error) {
	at := time.Now()
	sql := dayStatement(loadKey{day: partition.DayOfID(uuid.MustParse(id)), claim: true, prompt: prompt}, claimReadSQLs[prompt])
	var attempt *int32
	var startedAt *time.Time
	r, err = scanRow(pool.QueryRow(ctx, sql, id, attempts), at, &attempt, &startedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, cl, false, nil
	case err != nil:
		return nil, cl, false, fmt.Errorf("read and claim delivery %s: %w", id, err)
	case attempt == nil:
		return r, cl, false, nil
	}
	return r, delivery.Claimed{Attempt: int(*attempt), StartedAt: *startedAt}, true, nil
}

// claimsFirst reports whether w's pass, a pass of w alone, takes the shorter way: its record's
// first pass, for a first attempt.
func claimsFirst(w *work) bool {
	return w.msg.Attempts == 0 && w.passes == 0 && w.tries == 0 && w.staleWait == 0
}

// claimFirst takes w, a record of a first attempt, the shorter way. A lease another worker
// holds ends the pass as on the path; a claim that took nothing gives the lease back and
// decides the record on the statement's read.
func (l *lane) claimFirst(ctx context.Context, w *work, end func(*work, result)) {
	w.passState = passState{}
	if len(l.lease(ctx, []*work{w}, end)) == 0 {
		return
	}
	span := trace.SpanFromContext(w.ctx)
	span.AddEvent(eventClaimStarted)
	r, cl, claimed, err := claimRead(ctx, l.d.pool, w.id, w.msg.Attempts, *l.cfg.RetryAmbiguous)
	span.AddEvent(eventRowsRead)
	if !claimed {
		l.release(w) // before w.r is set: the lease is the record's attempt's
	}
	w.r = r
	if err != nil {
		w.err = err
		end(w, resFailed)
		return
	}
	if !claimed {
		v, reason := l.decide(r, w.msg, time.Now().Before(w.staleUntil))
		if v == verdictSend { // the row changed between the statement's read and its lock
			end(w, resAgain)
			return
		}
		end(w, l.settle(w, v, reason))
		return
	}
	l.prepare(w)
	res := l.sendClaimed(w, cl)
	l.release(w)
	end(w, res)
}
