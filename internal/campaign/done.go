package campaign

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
)

// markDoneCampaigns ends ACTIVE campaigns DONE once none of their deliveries can change any
// more (every one SENT, FAILED, EXPIRED or CANCELLED). It looks at the campaigns not looked at
// for $1 seconds (updated_at, which the look sets even when the campaign is not done yet), at
// most $2 of them, locked FOR NO KEY UPDATE SKIP LOCKED as a lot locks its campaign: several
// expanders share the work, and a cancel waits for the look in progress. The open-delivery
// test stops at the first delivery not final (the notification_campaign index, then the
// delivery (notification_id, channel) index).
const markDoneCampaigns = `
WITH due AS (
  SELECT id FROM campaign
  WHERE status = '` + string(herald.CampaignActive) + `' AND updated_at <= now() - $1::float8 * interval '1 second'
  ORDER BY updated_at LIMIT $2
  FOR NO KEY UPDATE SKIP LOCKED)
UPDATE campaign AS c
SET status = CASE WHEN EXISTS (
                    SELECT 1 FROM notification n JOIN delivery d ON d.notification_id = n.id
                    WHERE n.campaign_id = c.id AND d.status IN ('PENDING', 'QUEUED', 'SENDING'))
                  THEN c.status ELSE '` + string(herald.CampaignDone) + `' END,
    updated_at = now()
FROM due WHERE c.id = due.id
RETURNING c.id, c.status`

// doneBatch bounds the campaigns one look checks.
const doneBatch = 10

// markDone runs markDoneCampaigns and logs every campaign it ended.
func (x *Expander) markDone(ctx context.Context) error {
	rows, err := x.pool.Query(ctx, markDoneCampaigns, x.cfg.DoneInterval.Seconds(), doneBatch)
	if err != nil {
		return fmt.Errorf("mark campaigns done: %w", err)
	}
	type checked struct {
		ID     uuid.UUID
		Status herald.CampaignStatus
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[checked])
	if err != nil {
		return fmt.Errorf("mark campaigns done: %w", err)
	}
	for _, c := range list {
		if c.Status == herald.CampaignDone {
			x.log.Info("campaign done", zap.String("campaign_id", c.ID.String()))
		}
	}
	return nil
}

// doneDue reports whether the expander should look for campaigns to end DONE now: at most
// once per DoneInterval (a look is a scan of each ACTIVE campaign's open deliveries).
func (x *Expander) doneDue(now time.Time) bool {
	if now.Before(x.nextDone) {
		return false
	}
	x.nextDone = now.Add(x.cfg.DoneInterval)
	return true
}
