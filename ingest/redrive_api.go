package ingest

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/redrive"
)

// redriveRequest is the body of POST /api/redrives as sent.
type redriveRequest struct {
	Filter           *redriveFilterRequest `json:"filter"`
	DryRun           *bool                 `json:"dryRun"`
	IncludePermanent *bool                 `json:"includePermanent"`
	ExpiresAt        *string               `json:"expiresAt"`
}

type redriveFilterRequest struct {
	Status     []string `json:"status"`
	Channel    *string  `json:"channel"`
	Provider   *string  `json:"provider"`
	ErrorClass *string  `json:"errorClass"`
	ErrorCode  *string  `json:"errorCode"`
	Template   *string  `json:"template"`
	CampaignID *string  `json:"campaignId"`
	From       *string  `json:"from"`
	To         *string  `json:"to"`
}

// redriveJSON is the answer of GET /api/redrives/{id}: the POST answer and the audit.
type redriveJSON struct {
	redrive.Answer
	ClientID         string         `json:"clientId"`
	Filter           redrive.Filter `json:"filter"`
	IncludePermanent bool           `json:"includePermanent"`
	ExpiresAt        *time.Time     `json:"expiresAt,omitempty"`
	CreatedAt        time.Time      `json:"createdAt"`
	FinishedAt       *time.Time     `json:"finishedAt,omitempty"`
}

// decodeRedrive turns the body into a redrive.Request: the types and formats here, the
// rules in Request.Check (run by redrive.Create).
func decodeRedrive(w http.ResponseWriter, r *http.Request, maxBytes int64) (redrive.Request, error) {
	var req redriveRequest
	if err := decodeBody(w, r, maxBytes, &req); err != nil {
		return redrive.Request{}, err
	}
	var fe fieldErrors
	var out redrive.Request
	if req.DryRun != nil {
		out.DryRun = *req.DryRun
	}
	if req.IncludePermanent != nil {
		out.IncludePermanent = *req.IncludePermanent
	}
	out.ExpiresAt = parseTimestamp(&fe, "expiresAt", req.ExpiresAt)
	if f := req.Filter; f != nil {
		for _, s := range f.Status {
			out.Filter.Status = append(out.Filter.Status, herald.Status(s))
		}
		str := func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		}
		out.Filter.Channel = herald.Channel(str(f.Channel))
		out.Filter.Provider, out.Filter.ErrorClass, out.Filter.ErrorCode = str(f.Provider), str(f.ErrorClass), str(f.ErrorCode)
		if out.Filter.Template = str(f.Template); out.Filter.Template != "" {
			checkTemplateName(&fe, "filter.template", out.Filter.Template)
		}
		if f.CampaignID != nil {
			id, err := uuid.Parse(*f.CampaignID)
			if err != nil {
				fe.add("filter.campaignId", "must be a campaign id (a UUID)")
			} else {
				out.Filter.CampaignID = &id
			}
		}
		out.Filter.From = parseTimestamp(&fe, "filter.from", f.From)
		out.Filter.To = parseTimestamp(&fe, "filter.to", f.To)
	}
	return out, fe.err()
}

// postRedrive accepts a re-drive (redrive.Create): 202 with its counts, RUNNING until the
// executors have re-armed every match, DONE at once for a dry run.
func (a *API) postRedrive(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	if !validIdempotencyKey(key) {
		a.fail(w, r, invalid(fieldError{Field: "Idempotency-Key", Message: "header is required: 1-100 printable ASCII characters"}))
		return
	}
	req, err := decodeRedrive(w, r, a.cfg.MaxBodyBytes)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	client := clientFrom(r.Context())
	ans, replayed, err := redrive.Create(r.Context(), a.pool, client, key, req, int64(a.cfg.RedriveMax))
	if err != nil {
		a.fail(w, r, redriveProblem(err))
		return
	}
	if !replayed {
		a.log.Info("re-drive accepted", zap.String("redrive_id", ans.ID), zap.String("client_id", client),
			zap.Bool("dry_run", ans.DryRun), zap.Int64("matched", ans.Matched))
	}
	w.Header().Set("Location", "/api/redrives/"+ans.ID)
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusAccepted, ans)
}

var errRedriveNotFound = newAPIError(http.StatusNotFound, codeNotFound, "no such re-drive")

func (a *API) getRedrive(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(mux.Vars(r)["id"])
	if err != nil {
		a.fail(w, r, errRedriveNotFound)
		return
	}
	rd, err := redrive.Get(r.Context(), a.pool, id)
	if err != nil {
		a.fail(w, r, redriveProblem(err))
		return
	}
	writeJSON(w, http.StatusOK, redriveJSON{Answer: *rd.Answer(), ClientID: rd.ClientID, Filter: rd.Filter,
		IncludePermanent: rd.IncludePermanent, ExpiresAt: rd.ExpiresAt, CreatedAt: rd.CreatedAt.UTC(), FinishedAt: rd.FinishedAt})
}

// redriveProblem translates internal/redrive's errors into the API's answers; anything else
// stays an internal error.
func redriveProblem(err error) error {
	var inv *redrive.InvalidError
	var many *redrive.TooManyError
	switch {
	case errors.As(err, &inv):
		fields := make([]fieldError, len(inv.Fields))
		for i, f := range inv.Fields {
			fields[i] = fieldError{Field: f.Field, Message: f.Message}
		}
		return invalid(fields...)
	case errors.As(err, &many):
		return newAPIError(http.StatusUnprocessableEntity, codeRedriveTooLarge,
			fmt.Sprintf("the filter matches %d deliveries; at most %d per re-drive (--redrive-max): narrow it", many.Matched, many.Max))
	case errors.Is(err, redrive.ErrUnbounded):
		return newAPIError(http.StatusUnprocessableEntity, codeRedriveUnbounded, err.Error()+": name a status or a time range")
	case errors.Is(err, redrive.ErrExpiresAtRequired):
		return newAPIError(http.StatusUnprocessableEntity, codeExpiresAtRequired, err.Error()+" in the future (expiresAt)")
	case errors.Is(err, redrive.ErrStatusNotSupported):
		return newAPIError(http.StatusUnprocessableEntity, codeStatusNotSupported, err.Error())
	case errors.Is(err, redrive.ErrKeyReused):
		return newAPIError(http.StatusUnprocessableEntity, codeIdempotencyKeyReused,
			"this Idempotency-Key was already used with a different request body")
	case errors.Is(err, redrive.ErrNotFound):
		return errRedriveNotFound
	}
	return err
}
