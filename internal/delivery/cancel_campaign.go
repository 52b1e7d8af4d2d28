package delivery

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// cancelCampaignSQL is cancelSQL for every delivery of a campaign's notifications: each ends
// CANCELLED only from PENDING or QUEUED, never from SENDING (a provider call may be in flight;
// its outcome stands) nor from a final state. The notifications are found through
// notification.campaign_id (indexed).
const cancelCampaignSQL = `
UPDATE delivery AS d SET status = 'CANCELLED', last_error = 'cancelled'
FROM notification AS n
WHERE n.campaign_id = $1 AND d.notification_id = n.id AND d.status IN ('PENDING', 'QUEUED')`

// CancelCampaign cancels the deliveries of campaign campaignID that are still PENDING or
// QUEUED (cancelCampaignSQL) and returns how many it cancelled. Dispatch claims only PENDING
// or QUEUED rows, so once the transaction that ran this commits, no provider call starts for
// a cancelled row; a worker holding its Kafka record reads the row, finds it final and drops
// the record.
func CancelCampaign(ctx context.Context, db DB, campaignID uuid.UUID) (int64, error) {
	tag, err := db.Exec(ctx, cancelCampaignSQL, pgtype.UUID{Bytes: campaignID, Valid: true})
	if err != nil {
		return 0, fmt.Errorf("cancel deliveries of campaign %s: %w", campaignID, err)
	}
	return tag.RowsAffected(), nil
}

// backToPending is the status a delivery leaving SENDING for PENDING takes (a retry, a
// deferral, a reaped claim): PENDING, or CANCELLED when its notification belongs to a campaign
// that was cancelled while the claim was held. CancelCampaign cannot cancel a SENDING row (its
// call may be in flight), so without this a retry would start a provider call for a cancelled
// campaign. alias names the delivery row in the statement.
//
// The campaign row is read FOR KEY SHARE, which waits only for a transaction holding it FOR
// UPDATE: the cancel (campaign.Lock locks the row FOR UPDATE, then campaign.Cancel sets
// CANCELLED and runs CancelCampaign in the same transaction). So either this statement runs first and commits
// PENDING, and the cancel's CancelCampaign, which starts after the lock is released, sees the
// row PENDING and cancels it; or it waits for the cancel and reads CANCELLED. The expander's
// lots lock the row FOR NO KEY UPDATE, which KEY SHARE does not wait for. A notification
// without a campaign joins no row: PENDING.
func backToPending(alias string) string {
	return backToPendingWithin(alias, "", "")
}

// backToPendingWithin is backToPending reading the notification only between the SQL uuid
// expressions lo (inclusive) and hi (exclusive), when they are not empty: bounds a statement
// of many rows knows at planning time, so that the read holds the partitions of those days
// only.
func backToPendingWithin(alias, lo, hi string) string {
	within := ""
	if lo != "" {
		within = ` AND n.id >= ` + lo + ` AND n.id < ` + hi
	}
	return `CASE WHEN (SELECT c.status FROM notification n JOIN campaign c ON c.id = n.campaign_id
                   WHERE n.id = ` + alias + `.notification_id` + within + ` FOR KEY SHARE OF c) = 'CANCELLED'
            THEN 'CANCELLED' ELSE 'PENDING' END`
}
