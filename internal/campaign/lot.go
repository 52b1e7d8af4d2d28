package campaign

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/recipient"
)

// pickCampaign takes the EXPANDING campaign nobody is expanding whose last lot is the oldest
// (every lot sets updated_at), so that campaigns take turns lot by lot: the row lock, held
// until the lot commits, is the expansion's mutual exclusion (SKIP LOCKED lets another
// expander take the next campaign instead of waiting), and a cancel or any other state
// change waits for it. The transaction's now() is the clock of the lot's rules.
const pickCampaign = `
SELECT id, client_id, request_hash, template, category, channels, priority, payload, send_at,
       expires_at, audience_kind, segment_tags, coalesce(segment_locale, ''), expanded_through,
       suppressed, now()
FROM campaign WHERE status = '` + string(herald.CampaignExpanding) + `'
ORDER BY updated_at LIMIT 1
FOR NO KEY UPDATE SKIP LOCKED`

// listLot reads the next lot of a list audience after the cursor ($2), in user id order, with
// each user's facts; a user id the directory does not hold comes back with known = false.
const listLot = `
SELECT r.user_id, c.user_id IS NOT NULL, ` + recipient.FactsColumns + `
FROM (SELECT user_id FROM campaign_recipient WHERE campaign_id = $1 AND user_id > $2
      ORDER BY user_id LIMIT $3) AS r
LEFT JOIN user_contact c ON c.user_id = r.user_id
LEFT JOIN user_preference p ON p.user_id = r.user_id
ORDER BY r.user_id`

// segmentLot reads the next lot of a segment after the cursor ($1): the users holding every
// tag of $2 (the GIN index on tags serves a selective tag; the primary key order serves the
// cursor) whose locale is $3 or a variant of it ("de" matches "de-AT"), "" matching all.
const segmentLot = `
SELECT c.user_id, true, ` + recipient.FactsColumns + `
FROM (SELECT * FROM user_contact
      WHERE user_id > $1 AND tags @> $2::text[]
        AND ($3 = '' OR locale = $3 OR locale LIKE $3 || '-%')
      ORDER BY user_id LIMIT $4) AS c
LEFT JOIN user_preference p ON p.user_id = c.user_id
ORDER BY c.user_id`

// advanceCampaign moves the cursor and the counts in the lot's transaction; a short lot ends
// the expansion (ACTIVE), and a segment's audience becomes the users it visited.
const advanceCampaign = `
UPDATE campaign SET expanded = expanded + $2, expanded_through = $3, suppressed = $4,
       status = CASE WHEN $5 THEN '` + string(herald.CampaignActive) + `' ELSE status END,
       audience = CASE WHEN $5 AND audience_kind = 'segment' THEN expanded + $2 ELSE audience END,
       updated_at = now()
WHERE id = $1`

// lotCampaign is the row of pickCampaign.
type lotCampaign struct {
	id              uuid.UUID
	clientID        string
	requestHash     []byte
	template        string
	category        string
	channels        []herald.Channel
	priority        herald.Priority
	payload         []byte
	sendAt          *time.Time
	expiresAt       *time.Time
	kind            string
	tags            []string
	locale          string
	expandedThrough int64
	suppressed      map[string]int64
	now             time.Time
}

// lotUser is one row of listLot or segmentLot.
type lotUser struct {
	id    int64
	known bool
	facts recipient.Facts
}

// ExpandLot writes the next lot of the EXPANDING campaign that waited longest and that no
// other expander holds, in one transaction: the lot's users are read after the cursor, each
// goes through recipient.Decide (the rules of a single POST), the notifications and
// deliveries are written by delivery.InsertLot and the cursor and counts move. It returns
// false when there was no campaign to expand, and the number of deliveries the lot wrote. Run
// calls it lot after lot; a test may call it to write one lot.
func (x *Expander) ExpandLot(ctx context.Context) (worked bool, written int, err error) {
	err = pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		// The lot's rows and the cursor commit together, so a commit lost in a crash takes
		// the cursor with it and the next expander writes the lot again: the lot need not
		// wait for its WAL flush. The relay streams only flushed WAL, so it never publishes
		// a row of a lost commit.
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
			return fmt.Errorf("expand lot: %w", err)
		}
		var c lotCampaign
		err := tx.QueryRow(ctx, pickCampaign).Scan(&c.id, &c.clientID, &c.requestHash, &c.template, &c.category,
			&c.channels, &c.priority, &c.payload, &c.sendAt, &c.expiresAt, &c.kind, &c.tags, &c.locale,
			&c.expandedThrough, &c.suppressed, &c.now)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pick campaign to expand: %w", err)
		}
		worked = true
		users, err := x.readLot(ctx, tx, &c)
		if err != nil {
			return err
		}
		lot, err := x.buildLot(&c, users)
		if err != nil {
			return err
		}
		if len(lot.Users) > 0 {
			if _, written, err = delivery.InsertLot(ctx, tx, lot); err != nil {
				return err
			}
		}
		through, last := c.expandedThrough, len(users) < x.cfg.LotSize
		if len(users) > 0 {
			through = users[len(users)-1].id
		}
		if _, err := tx.Exec(ctx, advanceCampaign, c.id, len(users), through, c.suppressed, last); err != nil {
			return fmt.Errorf("advance campaign %s: %w", c.id, err)
		}
		if last {
			x.log.Info("campaign expanded", zap.String("campaign_id", c.id.String()))
		}
		return nil
	})
	return worked, written, err
}

func (x *Expander) readLot(ctx context.Context, tx pgx.Tx, c *lotCampaign) ([]lotUser, error) {
	var rows pgx.Rows
	var err error
	if c.kind == "segment" {
		rows, err = tx.Query(ctx, segmentLot, c.expandedThrough, c.tags, c.locale, x.cfg.LotSize)
	} else {
		rows, err = tx.Query(ctx, listLot, c.id, c.expandedThrough, x.cfg.LotSize)
	}
	if err != nil {
		return nil, fmt.Errorf("read lot of campaign %s after user %d: %w", c.id, c.expandedThrough, err)
	}
	users := make([]lotUser, 0, x.cfg.LotSize)
	for rows.Next() {
		var u lotUser
		if err := rows.Scan(append([]any{&u.id, &u.known}, u.facts.Dest()...)...); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read lot of campaign %s after user %d: %w", c.id, c.expandedThrough, err)
		}
		users = append(users, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read lot of campaign %s after user %d: %w", c.id, c.expandedThrough, err)
	}
	return users, nil
}

// buildLot applies the rules to each user of the lot and counts the suppressed channels into
// c.suppressed. A user whose every channel is suppressed gets no notification row.
func (x *Expander) buildLot(c *lotCampaign, users []lotUser) (delivery.Lot, error) {
	lot := delivery.Lot{
		CampaignID: c.id, ClientID: c.clientID, RequestHash: c.requestHash, Template: c.template,
		Category: c.category, Payload: c.payload, Priority: c.priority, SendAt: c.sendAt, ExpiresAt: c.expiresAt,
		Users: make([]delivery.LotUser, 0, len(users)),
	}
	if c.suppressed == nil {
		c.suppressed = map[string]int64{}
	}
	prefix := "campaign\u00b7" + c.id.String() + "\u00b7"
	for i := range users {
		u := &users[i]
		if !u.known {
			c.suppressed[recipient.ReasonUnknownUser] += int64(len(c.channels))
			continue
		}
		d, err := recipient.Decide(recipient.Request{UserID: u.id, Channels: c.channels, Available: x.available,
			Category: c.category, Priority: c.priority, SendAt: c.sendAt}, &u.facts, c.now, x.log)
		if err != nil {
			return delivery.Lot{}, fmt.Errorf("campaign %s: %w", c.id, err)
		}
		for _, s := range d.Suppressed {
			c.suppressed[s.Reason]++
		}
		if len(d.Deliver) == 0 {
			continue
		}
		lu, err := lotUserRows(u.id, prefix, d)
		if err != nil {
			return delivery.Lot{}, fmt.Errorf("campaign %s: %w", c.id, err)
		}
		lot.Users = append(lot.Users, lu)
	}
	return lot, nil
}

// lotUserRows builds one user's notification: ids and the answer GET
// /api/notifications/{id} shows (recipient.Decision.Rows), and the derived idempotency key
// (the "·" cannot occur in a client's key, which is printable ASCII, so the two never
// collide).
func lotUserRows(userID int64, keyPrefix string, d recipient.Decision) (delivery.LotUser, error) {
	rows, err := d.Rows()
	if err != nil {
		return delivery.LotUser{}, err
	}
	return delivery.LotUser{
		NotificationID: rows.NotificationID, IdempotencyKey: keyPrefix + strconv.FormatInt(userID, 10), UserID: userID,
		Response: rows.Answer, NextAttemptAt: d.Next, Deliveries: rows.Deliveries,
	}, nil
}
