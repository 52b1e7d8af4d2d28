package campaign

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

// The campaign row's states and their transitions (herald.CampaignStatus):
//
//	Insert:  → DRAFT, or → EXPANDING when created started
//	Start:   DRAFT → EXPANDING
//	ExpandLot (advanceCampaign): EXPANDING → ACTIVE with the last lot
//	markDone (markDoneCampaigns): ACTIVE → DONE once every delivery is final
//	Cancel:  DRAFT / EXPANDING / ACTIVE → CANCELLED, with its open deliveries
//
// Every statement here spells a status through that typed list: as a parameter, or, where a
// partial index must match (campaign_expanding), as a literal built from the constant. The callers of
// Start, Stage and Cancel hold the row's lock (Lock) and check the state they start from; the
// expander holds the same lock while it writes a lot, so a change waits for the lot in
// progress and the next lot sees it.

// ErrNotFound is returned by Lock for a campaign that does not exist or is another client's.
var ErrNotFound = errors.New("campaign not found")

// Row is a new campaign row (Insert). UserIDs nil means a segment audience.
type Row struct {
	ID                uuid.UUID
	ClientID          string
	IdempotencyKey    string
	RequestHash       []byte
	Response          any // the stored 202 answer, encoded as JSON
	Name, Template    string
	Category          string
	Channels          []herald.Channel
	Priority          herald.Priority
	Payload           []byte
	SendAt, ExpiresAt *time.Time
	UserIDs           []int64
	SegmentTags       []string
	SegmentLocale     string // "" matches every locale
	Status            herald.CampaignStatus
}

// insertCampaign writes the campaign; ON CONFLICT makes a concurrent request with the same
// Idempotency-Key wait for the first and then insert nothing (as delivery.Insert does).
const insertCampaign = `
INSERT INTO campaign (id, client_id, idempotency_key, request_hash, response, name, template,
                      category, channels, priority, payload, send_at, expires_at, audience_kind,
                      segment_tags, segment_locale, status, audience)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
ON CONFLICT (client_id, idempotency_key) DO NOTHING`

// Insert writes r, DRAFT or EXPANDING, with its listed recipients staged; a started segment
// campaign gets its audience counted. It returns false when the client's Idempotency-Key was
// taken and nothing was written.
func Insert(ctx context.Context, tx pgx.Tx, r Row) (bool, error) {
	if r.Status != herald.CampaignDraft && r.Status != herald.CampaignExpanding {
		return false, fmt.Errorf("insert campaign %s: status %s: must be DRAFT or EXPANDING", r.ID, r.Status)
	}
	kind, locale := "users", (*string)(nil)
	if r.UserIDs == nil {
		kind = "segment"
		if r.SegmentLocale != "" {
			locale = &r.SegmentLocale
		}
	}
	channels := make([]string, len(r.Channels))
	for i, c := range r.Channels {
		channels[i] = string(c)
	}
	tag, err := tx.Exec(ctx, insertCampaign, r.ID, r.ClientID, r.IdempotencyKey, r.RequestHash, r.Response, r.Name,
		r.Template, r.Category, channels, string(r.Priority), r.Payload, r.SendAt, r.ExpiresAt, kind, r.SegmentTags,
		locale, string(r.Status), len(r.UserIDs))
	if err != nil {
		return false, fmt.Errorf("insert campaign %s: %w", r.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if r.UserIDs != nil {
		if _, err := tx.Exec(ctx, insertRecipients, r.ID, r.UserIDs); err != nil {
			return false, fmt.Errorf("insert recipients of campaign %s: %w", r.ID, err)
		}
	}
	if r.Status == herald.CampaignExpanding && r.UserIDs == nil {
		if _, err := tx.Exec(ctx, countSegmentAudience, r.ID); err != nil {
			return false, fmt.Errorf("count audience of campaign %s: %w", r.ID, err)
		}
	}
	return true, nil
}

// lockCampaign locks a campaign of the client for a state change (FOR UPDATE: a retry's FOR
// KEY SHARE read of the status, delivery's backToPending, waits for the change).
const lockCampaign = `SELECT status, audience_kind FROM campaign WHERE id = $1 AND client_id = $2 FOR UPDATE`

// Lock locks campaign id of clientID in tx for a state change and returns its status and
// whether its audience is a segment; ErrNotFound when there is no such campaign.
func Lock(ctx context.Context, tx pgx.Tx, id uuid.UUID, clientID string) (status herald.CampaignStatus, segment bool, err error) {
	var kind string
	err = tx.QueryRow(ctx, lockCampaign, id, clientID).Scan(&status, &kind)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, ErrNotFound
	}
	if err != nil {
		return "", false, fmt.Errorf("lock campaign %s: %w", id, err)
	}
	return status, kind == "segment", nil
}

const insertRecipients = `
INSERT INTO campaign_recipient (campaign_id, user_id)
SELECT $1, u FROM unnest($2::bigint[]) AS u
ON CONFLICT DO NOTHING`

const addAudience = `UPDATE campaign SET audience = audience + $2, updated_at = now() WHERE id = $1`

// Stage adds user ids to a locked DRAFT list campaign; an id staged before counts once.
func Stage(ctx context.Context, tx pgx.Tx, id uuid.UUID, userIDs []int64) error {
	tag, err := tx.Exec(ctx, insertRecipients, id, userIDs)
	if err != nil {
		return fmt.Errorf("insert recipients of campaign %s: %w", id, err)
	}
	if _, err := tx.Exec(ctx, addAudience, id, tag.RowsAffected()); err != nil {
		return fmt.Errorf("count recipients of campaign %s: %w", id, err)
	}
	return nil
}

// setStatus moves a locked campaign to a status.
const setStatus = `UPDATE campaign SET status = $2, updated_at = now() WHERE id = $1`

// countSegmentAudience sets a segment campaign's audience to the users the segment matches
// now; the expander corrects it to the users it visited when it finishes.
const countSegmentAudience = `
UPDATE campaign c SET audience = (
    SELECT count(*) FROM user_contact u
    WHERE u.tags @> c.segment_tags
      AND (c.segment_locale IS NULL OR u.locale = c.segment_locale OR u.locale LIKE c.segment_locale || '-%'))
WHERE c.id = $1 AND c.audience_kind = 'segment'`

// Start moves a locked DRAFT campaign to EXPANDING, where an expander picks it up, and
// counts a segment's audience.
func Start(ctx context.Context, tx pgx.Tx, id uuid.UUID) error {
	if _, err := tx.Exec(ctx, setStatus, id, string(herald.CampaignExpanding)); err != nil {
		return fmt.Errorf("start campaign %s: %w", id, err)
	}
	if _, err := tx.Exec(ctx, countSegmentAudience, id); err != nil {
		return fmt.Errorf("count audience of campaign %s: %w", id, err)
	}
	return nil
}

// Cancel moves a locked campaign to CANCELLED: expansion stops at the next lot, and every
// delivery still PENDING or QUEUED ends CANCELLED (delivery.CancelCampaign) in the same
// transaction, so once it commits no provider call can start for the campaign. It returns
// how many deliveries it cancelled.
func Cancel(ctx context.Context, tx pgx.Tx, id uuid.UUID) (int64, error) {
	if _, err := tx.Exec(ctx, setStatus, id, string(herald.CampaignCancelled)); err != nil {
		return 0, fmt.Errorf("cancel campaign %s: %w", id, err)
	}
	return delivery.CancelCampaign(ctx, tx, id)
}
