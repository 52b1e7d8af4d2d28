package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/heraldhq/herald"
)

// Redrivable is a FAILED or EXPIRED delivery as a re-drive read it, for Redrive.
type Redrivable struct {
	ID       string
	Status   herald.Status // FAILED or EXPIRED
	Attempts int
}

// redriveSQL is the one move back of the state machine: an operator's re-drive ($1) returns
// FAILED or EXPIRED deliveries to PENDING, each only from the status and attempt count the
// re-drive read (the compare-and-set; a row that moved on matches nothing). The row keeps its
// id, its attempt log and its attempt count, so attempt numbers go on; attempts_at_redrive
// records that count, and dispatch's give-up rule counts only the attempts after it (a fresh
// budget). redrive_id names the re-drive, and every attempt logged from now on copies it.
//
// next_attempt_at = now() makes the new version due at write time (next_attempt_at equals
// the updated_at the delivery_touch trigger sets), so the relay publishes it from the WAL as
// it publishes a fresh insert; the sweeper's grace-period scan is the fallback as for any row.
// $2, when not NULL, is the row's new expires_at (re-driving an EXPIRED row needs one).
//
// A delivery of a cancelled campaign stays where it is: the campaign row is read FOR KEY
// SHARE, as backToPending reads it, so a cancel either commits first (and the row is left
// FAILED) or waits until this statement committed, and then cancels the PENDING row. The
// campaign is found by its id, read from the notification by primary key: written as a join,
// the planner walked a campaign's notifications (notification_campaign) for every row, and a
// lot of 1,000 deliveries took 26 s beside a campaign of 20,000 users.
// The ids travel as text and are cast, as in every batch statement of this package.
const redriveSQL = `
WITH s AS (
    SELECT * FROM unnest($3::text[], $4::text[], $5::int[]) AS s(id, status, attempts))
UPDATE delivery AS d
   SET status = 'PENDING', next_attempt_at = now(), redrive_id = $1, attempts_at_redrive = d.attempts,
       expires_at = coalesce($2, d.expires_at)
  FROM s
 WHERE d.id = ANY($3::text[]::uuid[]) AND d.id = s.id::uuid
   AND d.status IN ('FAILED', 'EXPIRED') AND d.status = s.status AND d.attempts = s.attempts
   AND (SELECT c.status FROM campaign c
         WHERE c.id = (SELECT n.campaign_id FROM notification n WHERE n.id = d.notification_id)
           FOR KEY SHARE) IS DISTINCT FROM 'CANCELLED'
RETURNING d.id::text`

// Redrive moves the rows of re-drive redriveID that are still as read back to PENDING
// (redriveSQL), with expires_at set to expiresAt when it is not nil, and returns the ids it
// moved. Run it in the transaction that advances the re-drive's cursor, so that a crash
// loses both or neither.
func Redrive(ctx context.Context, db DB, redriveID uuid.UUID, expiresAt *time.Time, rows []Redrivable) ([]string, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	ids, statuses, attempts := make([]string, len(rows)), make([]string, len(rows)), make([]int32, len(rows))
	for i, r := range rows {
		ids[i], statuses[i], attempts[i] = r.ID, string(r.Status), int32(r.Attempts)
	}
	// Unnamed (QueryExecModeExec), as RecordBatch: planned for the ids at hand, which prunes
	// the partitions read to the ids' days; a generic plan would hold every partition.
	q, err := db.Query(ctx, redriveSQL, pgx.QueryExecModeExec, pgtype.UUID{Bytes: redriveID, Valid: true}, expiresAt, ids, statuses, attempts)
	if err != nil {
		return nil, fmt.Errorf("redrive %d deliveries (first %s) for re-drive %s: %w", len(rows), rows[0].ID, redriveID, err)
	}
	defer q.Close()
	var out []string
	for q.Next() {
		var id string
		if err := q.Scan(&id); err != nil {
			return nil, fmt.Errorf("redrive deliveries for re-drive %s: scan: %w", redriveID, err)
		}
		out = append(out, id)
	}
	if err := q.Err(); err != nil {
		return nil, fmt.Errorf("redrive %d deliveries (first %s) for re-drive %s: %w", len(rows), rows[0].ID, redriveID, err)
	}
	return out, nil
}
