package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

// lockCampaign locks a campaign of the client for a state change. The expander holds the
// same row lock while it writes a lot, so a state change waits for the lot in progress and
// the next lot sees the new state.
const lockCampaign = `SELECT status, audience_kind FROM campaign WHERE id = $1 AND client_id = $2 FOR UPDATE`

const addAudience = `UPDATE campaign SET audience = audience + $2, updated_at = now() WHERE id = $1`

const startCampaign = `UPDATE campaign SET status = 'EXPANDING', updated_at = now() WHERE id = $1`

// countSegmentAudience sets a segment campaign's audience to the users the segment matches
// now; the expander corrects it to the users it visited when it finishes.
const countSegmentAudience = `
UPDATE campaign c SET audience = (
    SELECT count(*) FROM user_contact u
    WHERE u.tags @> c.segment_tags
      AND (c.segment_locale IS NULL OR u.locale = c.segment_locale OR u.locale LIKE c.segment_locale || '-%'))
WHERE c.id = $1 AND c.audience_kind = 'segment'`

const cancelCampaign = `UPDATE campaign SET status = 'CANCELLED', updated_at = now() WHERE id = $1`

type recipientsRequest struct {
	UserIDs []int64 `json:"userIds"`
}

func conflict(detail string) error {
	return newAPIError(http.StatusConflict, codeCampaignConflict, detail)
}

// changeCampaign runs change on a locked campaign of the client in one transaction and
// answers the campaign as it is after the commit.
func (a *API) changeCampaign(w http.ResponseWriter, r *http.Request, change func(ctx context.Context, tx pgx.Tx, id uuid.UUID, status herald.CampaignStatus, kind string) error) {
	ctx := r.Context()
	id, err := campaignIDVar(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	client := clientFrom(ctx)
	err = pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		var (
			status herald.CampaignStatus
			kind   string
		)
		err := tx.QueryRow(ctx, lockCampaign, id, client).Scan(&status, &kind)
		if errors.Is(err, pgx.ErrNoRows) {
			return errCampaignNotFound
		}
		if err != nil {
			return fmt.Errorf("lock campaign %s: %w", id, err)
		}
		return change(ctx, tx, id, status, kind)
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := a.readCampaign(ctx, a.pool, id, client)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// postRecipients stages more user ids of a DRAFT campaign given by list.
func (a *API) postRecipients(w http.ResponseWriter, r *http.Request) {
	var req recipientsRequest
	if err := decodeBody(w, r, maxCampaignBodyBytes, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	var fe fieldErrors
	if req.UserIDs == nil {
		fe.add("userIds", "is required")
	}
	ids, err := checkUserIDs(&fe, "userIds", req.UserIDs)
	if err == nil {
		err = fe.err()
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.changeCampaign(w, r, func(ctx context.Context, tx pgx.Tx, id uuid.UUID, status herald.CampaignStatus, kind string) error {
		if status != herald.CampaignDraft {
			return conflict("recipients can be added to a DRAFT campaign only; this one is " + string(status))
		}
		if kind != "users" {
			return conflict("this campaign's audience is a segment")
		}
		tag, err := tx.Exec(ctx, insertRecipients, id, ids)
		if err != nil {
			return fmt.Errorf("insert recipients of campaign %s: %w", id, err)
		}
		if _, err := tx.Exec(ctx, addAudience, id, tag.RowsAffected()); err != nil {
			return fmt.Errorf("count recipients of campaign %s: %w", id, err)
		}
		return nil
	})
}

// postStart starts a DRAFT campaign. Starting a started campaign changes nothing.
func (a *API) postStart(w http.ResponseWriter, r *http.Request) {
	a.changeCampaign(w, r, func(ctx context.Context, tx pgx.Tx, id uuid.UUID, status herald.CampaignStatus, _ string) error {
		switch status {
		case herald.CampaignDraft:
		case herald.CampaignCancelled:
			return conflict("a CANCELLED campaign cannot start")
		default:
			return nil
		}
		if _, err := tx.Exec(ctx, startCampaign, id); err != nil {
			return fmt.Errorf("start campaign %s: %w", id, err)
		}
		if _, err := tx.Exec(ctx, countSegmentAudience, id); err != nil {
			return fmt.Errorf("count audience of campaign %s: %w", id, err)
		}
		a.log.Info("campaign started", zap.String("campaign_id", id.String()))
		return nil
	})
}

// postCancel cancels a campaign: expansion stops at the next lot, and every delivery still
// PENDING or QUEUED ends CANCELLED (delivery.CancelCampaign) in the same transaction, so when
// the answer arrives no provider call can start for the campaign. Calls in flight finish and
// are recorded. Cancelling a cancelled campaign changes nothing; a DONE one is 409.
func (a *API) postCancel(w http.ResponseWriter, r *http.Request) {
	a.changeCampaign(w, r, func(ctx context.Context, tx pgx.Tx, id uuid.UUID, status herald.CampaignStatus, _ string) error {
		switch status {
		case herald.CampaignCancelled:
			return nil
		case herald.CampaignDone:
			return conflict("a DONE campaign has nothing left to cancel")
		}
		if _, err := tx.Exec(ctx, cancelCampaign, id); err != nil {
			return fmt.Errorf("cancel campaign %s: %w", id, err)
		}
		n, err := delivery.CancelCampaign(ctx, tx, id)
		if err != nil {
			return err
		}
		a.log.Info("campaign cancelled", zap.String("campaign_id", id.String()), zap.Int64("deliveries_cancelled", n))
		return nil
	})
}
