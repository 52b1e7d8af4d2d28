package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/campaign"
)

// campaignAcceptedJSON is the 202 answer of POST /api/campaigns, stored in campaign.response
// and replayed for a repeated Idempotency-Key.
type campaignAcceptedJSON struct {
	ID     string                `json:"id"`
	Status herald.CampaignStatus `json:"status"`
}

const selectCampaignByKey = `
SELECT request_hash, response FROM campaign WHERE client_id = $1 AND idempotency_key = $2`

// selectTemplateForCampaign reads the template (NULLs: unknown) and the database clock.
const selectTemplateForCampaign = `
SELECT now(), t.category, t.channels, t.content FROM (SELECT 1) AS one LEFT JOIN template t ON t.name = $1`

func (a *API) postCampaign(w http.ResponseWriter, r *http.Request) {
	if err := checkJSONContentType(r.Header.Get("Content-Type")); err != nil {
		a.fail(w, r, err)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if !validIdempotencyKey(key) {
		a.fail(w, r, invalid(fieldError{Field: "Idempotency-Key", Message: "header is required: 1-100 printable ASCII characters"}))
		return
	}
	body := http.MaxBytesReader(w, r.Body, maxCampaignBodyBytes)
	defer body.Close()
	in, err := decodeCampaign(body, a.cfg.MaxPayloadBytes)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.acceptsPriority(in.Priority); err != nil {
		a.fail(w, r, err)
		return
	}
	resp, replayed, err := a.createCampaign(r.Context(), clientFrom(r.Context()), key, in)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/campaigns/"+resp.ID)
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusAccepted, resp)
}

// createCampaign stores the campaign and its staged recipients in one transaction, or finds
// the earlier answer for the same Idempotency-Key. With start, the campaign is EXPANDING at
// once and an expander picks it up.
func (a *API) createCampaign(ctx context.Context, clientID, key string, in *campaignInput) (resp *campaignAcceptedJSON, replayed bool, err error) {
	hash := in.hash()
	err = pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		resp, replayed, err = replayCampaign(ctx, tx, clientID, key, hash)
		if err != nil || resp != nil {
			return err
		}
		if err := checkCampaignTemplate(ctx, tx, in); err != nil {
			return err
		}
		if err := requireAvailable(in.Channels, a.available); err != nil {
			return err
		}
		id, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("new campaign id: %w", err)
		}
		status := herald.CampaignDraft
		if in.Start {
			status = herald.CampaignExpanding
		}
		resp = &campaignAcceptedJSON{ID: id.String(), Status: status}
		inserted, err := campaign.Insert(ctx, tx, campaignRow(id, clientID, key, hash, resp, in))
		if err != nil {
			return err
		}
		if !inserted {
			// A concurrent request with the same key committed first; its answer is ours.
			resp, replayed, err = replayCampaign(ctx, tx, clientID, key, hash)
			return err
		}
		a.log.Info("campaign created", zap.String("campaign_id", resp.ID), zap.String("client_id", clientID),
			zap.String("status", string(status)), zap.Int("user_ids", len(in.UserIDs)))
		return nil
	})
	return resp, replayed, err
}

// replayCampaign returns the stored answer of an earlier campaign with the same key (nil when
// there is none), or idempotency_key_reused when its request differed.
func replayCampaign(ctx context.Context, tx pgx.Tx, clientID, key string, hash []byte) (*campaignAcceptedJSON, bool, error) {
	var storedHash []byte
	var stored campaignAcceptedJSON
	err := tx.QueryRow(ctx, selectCampaignByKey, clientID, key).Scan(&storedHash, &stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read campaign for idempotency key of client %s: %w", clientID, err)
	}
	if !bytes.Equal(hash, storedHash) {
		return nil, false, newAPIError(http.StatusUnprocessableEntity, codeIdempotencyKeyReused,
			"this Idempotency-Key was already used with a different request body")
	}
	return &stored, true, nil
}

// checkCampaignTemplate checks the template exists (422 unknown_template), supports every
// channel, and renders with the shared payload in its default locale, and that expiresAt is
// in the future by the database clock.
func checkCampaignTemplate(ctx context.Context, tx pgx.Tx, in *campaignInput) error {
	var now time.Time
	var category *string
	var channels []string
	var content []byte
	if err := tx.QueryRow(ctx, selectTemplateForCampaign, in.Template).Scan(&now, &category, &channels, &content); err != nil {
		return fmt.Errorf("read template of campaign: %w", err)
	}
	if category == nil {
		return newAPIError(http.StatusUnprocessableEntity, codeUnknownTemplate,
			fmt.Sprintf("template %q does not exist", in.Template))
	}
	var fe fieldErrors
	for _, c := range in.Channels {
		if !containsChannel(channels, c) {
			fe.add("channels", "template %q does not support %s", in.Template, c)
		}
	}
	if in.ExpiresAt != nil && !in.ExpiresAt.After(now) {
		fe.add("expiresAt", "must be in the future")
	}
	if err := fe.err(); err != nil {
		return err
	}
	in.category = *category
	return checkRender(content, "", in.Channels, in.payload)
}

// campaignRow is the campaign row of the request in.
func campaignRow(id uuid.UUID, clientID, key string, hash []byte, resp *campaignAcceptedJSON, in *campaignInput) campaign.Row {
	row := campaign.Row{ID: id, ClientID: clientID, IdempotencyKey: key, RequestHash: hash, Response: resp,
		Name: in.Name, Template: in.Template, Category: in.category, Channels: in.Channels, Priority: in.Priority,
		Payload: []byte(in.Payload), SendAt: in.SendAt, ExpiresAt: in.ExpiresAt, UserIDs: in.UserIDs, Status: resp.Status}
	if in.Segment != nil {
		row.SegmentTags, row.SegmentLocale = in.Segment.Tags, in.Segment.Locale
	}
	return row
}
