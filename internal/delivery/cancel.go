package delivery

import (
	"context"
	"fmt"
)

// cancelSQL ends the deliveries of the given notifications CANCELLED, each only while no
// worker holds it: from PENDING or QUEUED, never from SENDING (a provider call may be in
// flight; its outcome stands) nor from a final state. A QUEUED row's Kafka record is still
// out there; the worker that reads it finds the row final and drops it, and the relay never
// publishes a CANCELLED row (it publishes PENDING rows only). No attempt row is written: the
// provider was never called.
const cancelSQL = `
UPDATE delivery SET status = 'CANCELLED', last_error = 'cancelled'
WHERE notification_id = ANY($1::uuid[]) AND status IN ('PENDING', 'QUEUED')`

// Cancel cancels the deliveries of notificationIDs that are still PENDING or QUEUED
// (cancelSQL) and returns how many it cancelled.
func Cancel(ctx context.Context, db DB, notificationIDs []string) (int64, error) {
	tag, err := db.Exec(ctx, cancelSQL, notificationIDs)
	if err != nil {
		return 0, fmt.Errorf("cancel deliveries of %d notifications: %w", len(notificationIDs), err)
	}
	return tag.RowsAffected(), nil
}
