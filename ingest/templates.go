package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/mux"
	"github.com/jackc/pgx/v5"
)

// templateJSON is a template of the registry: the name a notification refers to, the
// category its notifications get by default, the channels it supports, and its content per
// channel and locale in the shape of senders/templates ({} renders with dispatch's built-in
// fallback).
type templateJSON struct {
	Name      string          `json:"name"`
	Category  string          `json:"category"`
	Channels  []string        `json:"channels"`
	Content   json.RawMessage `json:"content"`
	UpdatedAt time.Time       `json:"updatedAt"`
}

type templateRequest struct {
	Category *string         `json:"category"`
	Channels []string        `json:"channels"`
	Content  json.RawMessage `json:"content"`
}

const upsertTemplate = `
INSERT INTO template (name, category, channels, content) VALUES ($1, $2, $3, $4)
ON CONFLICT (name) DO UPDATE SET
    category = EXCLUDED.category, channels = EXCLUDED.channels, content = EXCLUDED.content,
    updated_at = now()
RETURNING updated_at`

const selectTemplate = `
SELECT category, channels, content, updated_at FROM template WHERE name = $1`

func (a *API) putTemplate(w http.ResponseWriter, r *http.Request) {
	name := mux.Vars(r)["name"]
	var fe fieldErrors
	checkTemplateName(&fe, "name", name)
	if err := fe.err(); err != nil {
		a.fail(w, r, err)
		return
	}
	var req templateRequest
	if err := decodeBody(w, r, a.cfg.MaxBodyBytes, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	t := templateJSON{Name: name}
	if req.Category == nil {
		fe.add("category", "is required")
	} else {
		t.Category = *req.Category
		checkCategory(&fe, "category", t.Category)
	}
	channels := parseChannels(&fe, "channels", req.Channels, req.Channels != nil)
	t.Channels = channelStrings(channels)
	t.Content = normalizeObject(&fe, "content", req.Content, int(a.cfg.MaxBodyBytes))
	if err := fe.err(); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := checkTemplateContent(t.Content, channels); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.pool.QueryRow(r.Context(), upsertTemplate, t.Name, t.Category, t.Channels, []byte(t.Content)).Scan(&t.UpdatedAt); err != nil {
		a.fail(w, r, fmt.Errorf("store template %q: %w", name, err))
		return
	}
	t.UpdatedAt = t.UpdatedAt.UTC()
	writeJSON(w, http.StatusOK, t)
}

func (a *API) getTemplate(w http.ResponseWriter, r *http.Request) {
	t := templateJSON{Name: mux.Vars(r)["name"]}
	if !nameRe.MatchString(t.Name) {
		a.fail(w, r, newAPIError(http.StatusNotFound, codeNotFound, "no such template"))
		return
	}
	var content []byte
	err := a.pool.QueryRow(r.Context(), selectTemplate, t.Name).Scan(&t.Category, &t.Channels, &content, &t.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		a.fail(w, r, newAPIError(http.StatusNotFound, codeNotFound, "no such template"))
		return
	}
	if err != nil {
		a.fail(w, r, fmt.Errorf("read template %q: %w", t.Name, err))
		return
	}
	t.Content = content
	t.UpdatedAt = t.UpdatedAt.UTC()
	writeJSON(w, http.StatusOK, t)
}
