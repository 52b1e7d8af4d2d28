package redrive

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/delivery"
)

// matchFrom is the FROM of every re-drive read: a delivery with its notification (template,
// campaign), its campaign (a cancelled one is skipped) and its last attempt (error class and
// code; the attempt numbered d.attempts). Each join is a primary-key probe. The attempt is
// read LATERAL with a LIMIT (which keeps the planner from flattening it back into a join) on
// purpose: as a plain join, with a condition on the attempt (errorCode), the planner
// merge-joined delivery_attempt's primary key from its first row, so that every lot re-read
// the attempts of all the lots before it (a re-drive of 100,000 rows ran at 760/s).
const matchFrom = `
  FROM delivery d
  JOIN notification n ON n.id = d.notification_id
  LEFT JOIN campaign c ON c.id = n.campaign_id
  LEFT JOIN LATERAL (SELECT a.outcome, a.provider_code FROM delivery_attempt a
                      WHERE a.delivery_id = d.id AND a.attempt = d.attempts LIMIT 1) la ON true`

// skipReason is why a matched delivery is left alone, empty when it is re-armed; $1 is
// includePermanent, $2 the request's expiresAt (NULL: none). The order decides which reason
// a delivery that has several is counted under.
const skipReason = `CASE WHEN c.status = 'CANCELLED' THEN '` + SkipCampaignCancelled + `'
            WHEN NOT $1::boolean AND la.outcome = 'PERMANENT' THEN '` + SkipPermanent + `'
            WHEN $2::timestamptz IS NULL AND d.expires_at <= now() THEN '` + SkipExpired + `'
            ELSE '' END`

// where is the filter as SQL conditions on the aliases of matchFrom, its values appended to
// args as numbered parameters. The literal status list lets the planner use
// delivery_redrivable (partial on exactly those statuses): a parameter alone would not prove
// the index's predicate. A delivery that failed before To was made before To, so To bounds
// the delivery id as well, and a partition made after To is not read.
func (f *Filter) where(args *[]any) string {
	p := func(v any) string {
		*args = append(*args, v)
		return "$" + strconv.Itoa(len(*args))
	}
	statuses := make([]string, len(f.Status))
	for i, s := range f.Status {
		statuses[i] = string(s)
	}
	c := []string{`d.status IN ('FAILED', 'EXPIRED')`, `d.status = ANY(` + p(statuses) + `::text[])`}
	if f.Channel != "" {
		c = append(c, `d.channel = `+p(string(f.Channel)))
	}
	if f.Provider != "" {
		c = append(c, `d.provider = `+p(f.Provider))
	}
	if f.ErrorClass != "" {
		c = append(c, `la.outcome = `+p(f.ErrorClass))
	}
	if f.ErrorCode != "" {
		c = append(c, `la.provider_code = `+p(f.ErrorCode))
	}
	if f.Template != "" {
		c = append(c, `n.template = `+p(f.Template))
	}
	if f.CampaignID != nil {
		c = append(c, `n.campaign_id = `+p(*f.CampaignID))
	}
	if f.From != nil {
		c = append(c, `d.updated_at >= `+p(*f.From))
	}
	if f.To != nil {
		to := p(*f.To)
		c = append(c, `d.updated_at < `+to,
			`d.id < herald_day_bound(((`+to+`::timestamptz AT TIME ZONE 'UTC')::date + 1))`)
	}
	return strings.Join(c, "\n   AND ")
}

// count counts the deliveries f matches now, by skip reason (empty for those that would be
// re-armed).
func count(ctx context.Context, db delivery.DB, f *Filter, includePermanent bool, expiresAt *time.Time) (matched int64, byReason map[string]int64, err error) {
	args := []any{includePermanent, expiresAt}
	sql := `SELECT skip, count(*) FROM (SELECT ` + skipReason + ` AS skip` + matchFrom + `
 WHERE ` + f.where(&args) + `) AS m GROUP BY skip`
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return 0, nil, fmt.Errorf("count re-drive matches: %w", err)
	}
	byReason = map[string]int64{}
	var reason string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&reason, &n}, func() error {
		matched += n
		if reason != "" {
			byReason[reason] = n
		}
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("count re-drive matches: %w", err)
	}
	return matched, byReason, nil
}

// match is one delivery of a lot.
type match struct {
	delivery.Redrivable
	skip string
}

// lot reads the next at most limit matches of f after the delivery id cursor (nil: from the
// start), in id order, locked until the lot's transaction ends so that their writes wait for
// it; deliveries this re-drive re-armed already are not matches. The cursor is always a value
// (the nil uuid for the start): "$4 IS NULL OR d.id > $4" would not be an index condition in
// a generic plan, and every lot would walk the index from its first entry.
func lot(ctx context.Context, tx pgx.Tx, id any, f *Filter, includePermanent bool, expiresAt *time.Time, cursor *uuid.UUID, limit int) ([]match, error) {
	after := uuid.Nil
	if cursor != nil {
		after = *cursor
	}
	// Unnamed (QueryExecModeExec): planned for the values at hand on every lot, as dispatch's
	// batch reads are; a generic plan knows neither the cursor nor the filter's values.
	args := []any{includePermanent, expiresAt, id, after, limit}
	sql := `SELECT d.id::text, d.status, d.attempts, ` + skipReason + matchFrom + `
 WHERE d.redrive_id IS DISTINCT FROM $3 AND d.id > $4
   AND ` + f.where(&args) + `
 ORDER BY d.id LIMIT $5
   FOR UPDATE OF d`
	rows, err := tx.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("read re-drive lot: %w", err)
	}
	out := make([]match, 0, limit)
	var m match
	_, err = pgx.ForEachRow(rows, []any{&m.ID, &m.Status, &m.Attempts, &m.skip}, func() error {
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read re-drive lot: %w", err)
	}
	return out, nil
}
