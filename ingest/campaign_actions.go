package ingest

import (
	"context"
	"errors"
	"net/http"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/campaign"
)

type recipientsRequest struct {
	UserIDs []int64 `json:"userIds"`
}

func conflict(detail string) error {
	return newAPIError(http.StatusConflict, codeCampaignConflict, detail)
}

// changeCampaign runs change on a campaign of the client locked in one transaction
// (campaign.Lock: the expander holds the same lock while it writes a lot, so a change waits
// for the lot in progress and the next lot sees it) and answers the campaign as it is after
// the commit.
func (a *API) changeCampaign(w http.ResponseWriter, r *http.Request, change func(ctx context.Context, tx pgx.Tx, id uuid.UUID, status herald.CampaignStatus, segment bool) error) {
	ctx := r.Context()
	id, err := campaignIDVar(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	client := clientFrom(ctx)
	err = pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		status, segment, err := campaign.Lock(ctx, tx, id, client)
		if errors.Is(err, campaign.ErrNotFound) {
			return errCampaignNotFound
		}
		if err != nil {
			return err
		}
		return change(ctx, tx, id, status, segment)
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
	a.changeCampaign(w, r, func(ctx context.Context, tx pgx.Tx, id uuid.UUID, status herald.CampaignStatus, segment bool) error {
		if status != herald.CampaignDraft {
			return conflict("recipients can be added to a DRAFT campaign only; this one is " + string(status))
		}
		if segment {
			return conflict("this campaign's audience is a segment")
		}
		return campaign.Stage(ctx, tx, id, ids)
	})
}

// postStart starts a DRAFT campaign. Starting a started campaign changes nothing.
func (a *API) postStart(w http.ResponseWriter, r *http.Request) {
	a.changeCampaign(w, r, func(ctx context.Context, tx pgx.Tx, id uuid.UUID, status herald.CampaignStatus, _ bool) error {
		switch status {
		case herald.CampaignDraft:
		case herald.CampaignCancelled:
			return conflict("a CANCELLED campaign cannot start")
		default:
			return nil
		}
		if err := campaign.Start(ctx, tx, id); err != nil {
			return err
		}
		a.log.Info("campaign started", zap.String("campaign_id", id.String()))
		return nil
	})
}

// postCancel cancels a campaign (campaign.Cancel): expansion stops at the next lot, and every
// delivery still PENDING or QUEUED ends CANCELLED in the same transaction, so when the answer
// arrives no provider call can start for the campaign. Calls in flight finish and are
// recorded. Cancelling a cancelled campaign changes nothing; a DONE one is 409.
func (a *API) postCancel(w http.ResponseWriter, r *http.Request) {
	a.changeCampaign(w, r, func(ctx context.Context, tx pgx.Tx, id uuid.UUID, status herald.CampaignStatus, _ bool) error {
		switch status {
		case herald.CampaignCancelled:
			return nil
		case herald.CampaignDone:
			return conflict("a DONE campaign has nothing left to cancel")
		}
		n, err := campaign.Cancel(ctx, tx, id)
		if err != nil {
			return err
		}
		a.log.Info("campaign cancelled", zap.String("campaign_id", id.String()), zap.Int64("deliveries_cancelled", n))
		return nil
	})
}
