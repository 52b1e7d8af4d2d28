package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/recipient"
)

// preferencesJSON is the body of PUT /api/users/{userId}/preferences and the answer of both
// methods. A PUT replaces the whole document.
type preferencesJSON struct {
	OptOuts    []recipient.OptOut `json:"optOuts"`
	QuietHours *quietHoursJSON    `json:"quietHours"`
	UpdatedAt  *time.Time         `json:"updatedAt,omitempty"`
}

// optOutRequest is one opt-out as sent: channel names are validated before use.
type optOutRequest struct {
	Channel  string  `json:"channel"`
	Category *string `json:"category"`
}

type preferencesRequest struct {
	OptOuts    []optOutRequest `json:"optOuts"`
	QuietHours *quietHoursJSON `json:"quietHours"`
}

// quietHoursJSON holds wall-clock times "HH:MM" in the user's time zone (user_contact).
type quietHoursJSON struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

const upsertPreferences = `
INSERT INTO user_preference (user_id, opt_outs, quiet_start, quiet_end)
VALUES ($1, $2, $3, $4)
ON CONFLICT (user_id) DO UPDATE SET
    opt_outs = EXCLUDED.opt_outs, quiet_start = EXCLUDED.quiet_start,
    quiet_end = EXCLUDED.quiet_end, updated_at = now()
RETURNING updated_at`

const selectPreferences = `
SELECT opt_outs, quiet_start, quiet_end, updated_at FROM user_preference WHERE user_id = $1`

func (a *API) putPreferences(w http.ResponseWriter, r *http.Request) {
	userID, err := userIDVar(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var req preferencesRequest
	if err := decodeBody(w, r, a.cfg.MaxBodyBytes, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	p, start, end, err := validatePreferences(&req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	outs, err := json.Marshal(p.OptOuts)
	if err != nil {
		a.fail(w, r, fmt.Errorf("encode opt-outs of user %d: %w", userID, err))
		return
	}
	var updated time.Time
	if err := a.pool.QueryRow(r.Context(), upsertPreferences, userID, outs, start, end).Scan(&updated); err != nil {
		a.fail(w, r, fmt.Errorf("store preferences of user %d: %w", userID, err))
		return
	}
	updated = updated.UTC()
	p.UpdatedAt = &updated
	writeJSON(w, http.StatusOK, p)
}

func validatePreferences(req *preferencesRequest) (p *preferencesJSON, start, end pgtype.Time, err error) {
	var fe fieldErrors
	p = &preferencesJSON{OptOuts: make([]recipient.OptOut, 0, len(req.OptOuts)), QuietHours: req.QuietHours}
	if len(req.OptOuts) > maxOptOuts {
		fe.add("optOuts", "must hold at most %d entries", maxOptOuts)
	}
	for i, o := range req.OptOuts {
		f := fmt.Sprintf("optOuts[%d]", i)
		c, err := herald.ParseChannel(o.Channel)
		if err != nil {
			fe.add(f+".channel", "must be one of PUSH, EMAIL, SMS, WEBHOOK")
		}
		out := recipient.OptOut{Channel: c}
		if o.Category != nil {
			checkCategory(&fe, f+".category", *o.Category)
			out.Category = *o.Category
		}
		p.OptOuts = append(p.OptOuts, out)
	}
	if q := req.QuietHours; q != nil {
		s := parseClock(&fe, "quietHours.start", q.Start)
		e := parseClock(&fe, "quietHours.end", q.End)
		if clockRe.MatchString(q.Start) && clockRe.MatchString(q.End) && s == e {
			fe.add("quietHours.end", "must differ from start")
		}
		start = pgtype.Time{Microseconds: int64(s) * int64(time.Minute/time.Microsecond), Valid: true}
		end = pgtype.Time{Microseconds: int64(e) * int64(time.Minute/time.Microsecond), Valid: true}
	}
	return p, start, end, fe.err()
}

func (a *API) getPreferences(w http.ResponseWriter, r *http.Request) {
	userID, err := userIDVar(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var (
		outs       []byte
		start, end pgtype.Time
		updated    time.Time
	)
	err = a.pool.QueryRow(r.Context(), selectPreferences, userID).Scan(&outs, &start, &end, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		a.fail(w, r, newAPIError(http.StatusNotFound, codeNotFound, "no preferences stored for this user"))
		return
	}
	if err != nil {
		a.fail(w, r, fmt.Errorf("read preferences of user %d: %w", userID, err))
		return
	}
	p := preferencesJSON{OptOuts: []recipient.OptOut{}}
	if err := json.Unmarshal(outs, &p.OptOuts); err != nil {
		a.fail(w, r, fmt.Errorf("decode opt-outs of user %d: %w", userID, err))
		return
	}
	if start.Valid && end.Valid {
		const usPerMinute = int64(time.Minute / time.Microsecond)
		p.QuietHours = &quietHoursJSON{
			Start: clock(start.Microseconds / usPerMinute).String(),
			End:   clock(end.Microseconds / usPerMinute).String(),
		}
	}
	updated = updated.UTC()
	p.UpdatedAt = &updated
	writeJSON(w, http.StatusOK, p)
}
