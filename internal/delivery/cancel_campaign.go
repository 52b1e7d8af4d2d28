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
