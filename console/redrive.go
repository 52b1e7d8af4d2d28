package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/redrive"
)

// The re-drive pages: a filter form whose first button runs a dry run (the count, and what
// would be skipped, by reason), then a confirm button that runs the re-drive with the same
// filter, then the re-drive's own page, refreshed until it is DONE. Both buttons go through
// redrive.Create, as POST /api/redrives does: the same checks, the --redrive-max bound and
// the audit, under the logged-in operator's client. The confirm's Idempotency-Key is derived
// from the dry run's id, so a form sent twice re-drives once.

// redriveRefresh is how often, in seconds, a RUNNING re-drive's page reloads.
const redriveRefresh = 2

// redriveForm is the filter form as posted (and shown again).
type redriveForm struct {
	Failed, Expired, IncludePermanent                              bool
	Channel, Provider, ErrorClass, ErrorCode, Template, CampaignID string
	From, To, ExpiresAt                                            string
}

type redriveData struct {
	Form     redriveForm
	Channels []herald.Channel
	Classes  []string
	Error    string
	Dry      *redrive.Answer // the dry run just made, if any
	Would    int64           // what the dry run would re-drive
	Recent   []redrive.Redrive
}

type redriveOneData struct {
	R       *redrive.Redrive
	Refresh int
}

func (c *Console) redriveData(ctx context.Context, f redriveForm) (redriveData, error) {
	recent, err := redrive.Recent(ctx, c.pool, 20)
	return redriveData{Form: f, Channels: herald.Channels, Classes: redrive.ErrorClasses, Recent: recent}, err
}

// redrives shows the empty form and the recent re-drives.
func (c *Console) redrives(w http.ResponseWriter, r *http.Request) {
	d, err := c.redriveData(r.Context(), redriveForm{Failed: true})
	if err != nil {
		c.fail(w, http.StatusInternalServerError, "the re-drives could not be read", err)
		return
	}
	c.render(w, http.StatusOK, "redrive", page{Title: "Re-drive", LoggedIn: true, Nav: "redrive", Data: d})
}

// postRedrive runs the dry run (action=dry) or the confirmed re-drive (action=run, with the
// dry run's id in dry).
func (c *Console) postRedrive(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		c.fail(w, http.StatusBadRequest, "the form could not be read", err)
		return
	}
	pf := r.PostForm
	f := redriveForm{Failed: pf.Get("failed") != "", Expired: pf.Get("expired") != "", IncludePermanent: pf.Get("includePermanent") != "",
		Channel: pf.Get("channel"), Provider: strings.TrimSpace(pf.Get("provider")), ErrorClass: pf.Get("errorClass"),
		ErrorCode: strings.TrimSpace(pf.Get("errorCode")), Template: strings.TrimSpace(pf.Get("template")),
		CampaignID: strings.TrimSpace(pf.Get("campaignId")), From: strings.TrimSpace(pf.Get("from")),
		To: strings.TrimSpace(pf.Get("to")), ExpiresAt: strings.TrimSpace(pf.Get("expiresAt"))}
	ctx := r.Context()
	d, err := c.redriveData(ctx, f)
	if err != nil {
		c.fail(w, http.StatusInternalServerError, "the re-drives could not be read", err)
		return
	}
	show := func(status int) {
		c.render(w, status, "redrive", page{Title: "Re-drive", LoggedIn: true, Nav: "redrive", Data: d})
	}
	req, msg := f.request()
	if msg != "" {
		d.Error = msg
		show(http.StatusBadRequest)
		return
	}
	client := clientOf(ctx)
	run := pf.Get("action") == "run"
	key := "console-dry-" + uuid.NewString()
	if run {
		dry, err := uuid.Parse(pf.Get("dry"))
		if err != nil {
			d.Error = "run the dry run first"
			show(http.StatusBadRequest)
			return
		}
		key = "console-" + dry.String()
	}
	req.DryRun = !run
	ans, _, err := redrive.Create(ctx, c.pool, client, key, req, int64(c.cfg.RedriveMax))
	if msg := redriveMessage(err); msg != "" {
		d.Error = msg
		show(http.StatusUnprocessableEntity)
		return
	}
	if err != nil {
		c.fail(w, http.StatusInternalServerError, "the re-drive could not be written", err)
		return
	}
	if run {
		c.log.Info("re-drive accepted", zap.String("redrive_id", ans.ID), zap.String("client_id", client), zap.Int64("matched", ans.Matched))
		http.Redirect(w, r, "/console/redrives/"+ans.ID, http.StatusSeeOther)
		return
	}
	d.Dry, d.Would = ans, ans.Matched
	for _, n := range ans.Skipped {
		d.Would -= n
	}
	show(http.StatusOK)
}

// redriveOne shows one re-drive: its counts, filter, who and when.
func (c *Console) redriveOne(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.fail(w, http.StatusNotFound, "no such re-drive", nil)
		return
	}
	rd, err := redrive.Get(r.Context(), c.pool, id)
	if errors.Is(err, redrive.ErrNotFound) {
		c.fail(w, http.StatusNotFound, "no such re-drive", nil)
		return
	}
	if err != nil {
		c.fail(w, http.StatusInternalServerError, "the re-drive could not be read", err)
		return
	}
	d := redriveOneData{R: rd}
	if rd.Status != redrive.StatusDone {
		d.Refresh = redriveRefresh
	}
	c.render(w, http.StatusOK, "redrive_one", page{Title: "Re-drive " + id.String(), LoggedIn: true, Nav: "redrive", Data: d})
}

// request turns the form into a redrive.Request; a message for the operator when a value
// cannot be read. The rules are Request.Check's, run by Create.
func (f redriveForm) request() (redrive.Request, string) {
	var req redrive.Request
	if f.Failed {
		req.Filter.Status = append(req.Filter.Status, herald.StatusFailed)
	}
	if f.Expired {
		req.Filter.Status = append(req.Filter.Status, herald.StatusExpired)
	}
	req.IncludePermanent = f.IncludePermanent
	req.Filter.Channel = herald.Channel(f.Channel)
	req.Filter.Provider, req.Filter.ErrorClass, req.Filter.ErrorCode, req.Filter.Template = f.Provider, f.ErrorClass, f.ErrorCode, f.Template
	if f.CampaignID != "" {
		id, err := uuid.Parse(f.CampaignID)
		if err != nil {
			return req, "campaign: not a campaign id"
		}
		req.Filter.CampaignID = &id
	}
	for _, t := range []struct {
		name, v string
		into    **time.Time
	}{{"from", f.From, &req.Filter.From}, {"to", f.To, &req.Filter.To}, {"expires at", f.ExpiresAt, &req.ExpiresAt}} {
		if t.v == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339, t.v)
		if err != nil {
			return req, t.name + ": not an RFC 3339 time (2026-12-01T09:00:00Z)"
		}
		at = at.UTC()
		*t.into = &at
	}
	return req, ""
}

// redriveMessage is what the operator reads for a refused re-drive; "" for no error or an
// internal one.
func redriveMessage(err error) string {
	var inv *redrive.InvalidError
	var many *redrive.TooManyError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &inv):
		msgs := make([]string, len(inv.Fields))
		for i, f := range inv.Fields {
			msgs[i] = f.Field + ": " + f.Message
		}
		return strings.Join(msgs, "; ")
	case errors.As(err, &many):
		return fmt.Sprintf("the filter matches %d deliveries; at most %d per re-drive: narrow it", many.Matched, many.Max)
	case slices.ContainsFunc([]error{redrive.ErrUnbounded, redrive.ErrExpiresAtRequired, redrive.ErrStatusNotSupported, redrive.ErrKeyReused},
		func(e error) bool { return errors.Is(err, e) }):
		return err.Error()
	}
	return ""
}
