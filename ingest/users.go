package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald/internal/pushtoken"
)

// contactJSON is a user's contact profile, the body of PUT /api/users/{userId} and the
// answer of both methods. Every member is optional; timeZone defaults to UTC. A PUT replaces
// the whole profile, push tokens included.
type contactJSON struct {
	UserID     int64           `json:"userId"`
	Email      *string         `json:"email"`
	Phone      *string         `json:"phone"`
	WebhookURL *string         `json:"webhookUrl"`
	Locale     *string         `json:"locale"`
	TimeZone   string          `json:"timeZone"`
	PushTokens []pushTokenJSON `json:"pushTokens"`
	Tags       []string        `json:"tags"` // segment tags of campaigns, sorted
	UpdatedAt  time.Time       `json:"updatedAt"`
}

// contactRequest is the PUT body: contactJSON without the members the server sets.
type contactRequest struct {
	Email      *string         `json:"email"`
	Phone      *string         `json:"phone"`
	WebhookURL *string         `json:"webhookUrl"`
	Locale     *string         `json:"locale"`
	TimeZone   *string         `json:"timeZone"`
	PushTokens []pushTokenJSON `json:"pushTokens"`
	Tags       []string        `json:"tags"`
}

const upsertContact = `
INSERT INTO user_contact (user_id, email, phone, webhook_url, locale, time_zone, tags)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (user_id) DO UPDATE SET
    email = EXCLUDED.email, phone = EXCLUDED.phone, webhook_url = EXCLUDED.webhook_url,
    locale = EXCLUDED.locale, time_zone = EXCLUDED.time_zone, tags = EXCLUDED.tags, updated_at = now()
RETURNING updated_at`

const selectContact = `
SELECT c.email, c.phone, c.webhook_url, c.locale, c.time_zone, c.tags, c.updated_at,
       ` + pushtoken.ContactArrays + `
FROM user_contact c WHERE c.user_id = $1`

// userIDVar parses the {userId} path variable: a positive int64.
func userIDVar(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(mux.Vars(r)["userId"], 10, 64)
	if err != nil || id <= 0 {
		return 0, invalid(fieldError{Field: "userId", Message: "must be a positive integer"})
	}
	return id, nil
}

func (a *API) putUser(w http.ResponseWriter, r *http.Request) {
	userID, err := userIDVar(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var req contactRequest
	if err := decodeBody(w, r, a.cfg.MaxBodyBytes, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := validateContact(userID, &req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.storeContact(r.Context(), c); err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func validateContact(userID int64, req *contactRequest) (*contactJSON, error) {
	var fe fieldErrors
	c := &contactJSON{UserID: userID, TimeZone: "UTC", PushTokens: req.PushTokens}
	if req.Email != nil && *req.Email != "" {
		checkEmail(&fe, "email", *req.Email)
		c.Email = req.Email
	}
	if req.Phone != nil && *req.Phone != "" {
		checkPhone(&fe, "phone", *req.Phone)
		c.Phone = req.Phone
	}
	if req.WebhookURL != nil && *req.WebhookURL != "" {
		checkWebhookURL(&fe, "webhookUrl", *req.WebhookURL)
		c.WebhookURL = req.WebhookURL
	}
	if req.Locale != nil && *req.Locale != "" {
		l := checkLocale(&fe, "locale", *req.Locale)
		c.Locale = &l
	}
	if req.TimeZone != nil {
		checkTimeZone(&fe, "timeZone", *req.TimeZone)
		c.TimeZone = *req.TimeZone
	}
	checkPushTokens(&fe, "pushTokens", req.PushTokens)
	if len(req.Tags) > maxUserTags {
		fe.add("tags", "must hold at most %d tags", maxUserTags)
	}
	for i, t := range req.Tags {
		checkTag(&fe, fmt.Sprintf("tags[%d]", i), t)
	}
	c.Tags = slices.Compact(slices.Sorted(slices.Values(req.Tags)))
	if c.Tags == nil {
		c.Tags = []string{}
	}
	if c.PushTokens == nil {
		c.PushTokens = []pushTokenJSON{}
	}
	// Stored tokens come back in token order; answer the PUT the same way.
	slices.SortFunc(c.PushTokens, func(x, y pushTokenJSON) int { return strings.Compare(x.Token, y.Token) })
	if err := fe.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// storeContact replaces the profile and its push tokens in one transaction.
func (a *API) storeContact(ctx context.Context, c *contactJSON) error {
	tokens := make([]string, len(c.PushTokens))
	platforms := make([]string, len(c.PushTokens))
	for i, t := range c.PushTokens {
		tokens[i], platforms[i] = t.Token, t.Platform
	}
	err := pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, upsertContact, c.UserID, c.Email, c.Phone, c.WebhookURL, c.Locale, c.TimeZone, c.Tags).Scan(&c.UpdatedAt); err != nil {
			return err
		}
		return pushtoken.Replace(ctx, tx, c.UserID, tokens, platforms)
	})
	if err != nil {
		return fmt.Errorf("store contact of user %d: %w", c.UserID, err)
	}
	c.UpdatedAt = c.UpdatedAt.UTC()
	return nil
}

func (a *API) getUser(w http.ResponseWriter, r *http.Request) {
	userID, err := userIDVar(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c := contactJSON{UserID: userID}
	var tokens, platforms []string
	err = a.pool.QueryRow(r.Context(), selectContact, userID).Scan(
		&c.Email, &c.Phone, &c.WebhookURL, &c.Locale, &c.TimeZone, &c.Tags, &c.UpdatedAt, &tokens, &platforms)
	if errors.Is(err, pgx.ErrNoRows) {
		a.fail(w, r, newAPIError(http.StatusNotFound, codeNotFound, "no such user"))
		return
	}
	if err != nil {
		a.fail(w, r, fmt.Errorf("read contact of user %d: %w", userID, err))
		return
	}
	c.UpdatedAt = c.UpdatedAt.UTC()
	c.PushTokens = make([]pushTokenJSON, len(tokens))
	for i := range tokens {
		c.PushTokens[i] = pushTokenJSON{Token: tokens[i], Platform: platforms[i]}
	}
	writeJSON(w, http.StatusOK, c)
}
