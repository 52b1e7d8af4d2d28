package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
	var req templateRequest
	if err := decodeBody(w, r, a.cfg.MaxBodyBytes, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	t, err := storeTemplate(r.Context(), a.pool, mux.Vars(r)["name"], req, int(a.cfg.MaxBodyBytes))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// storeTemplate validates a template and creates or replaces it. Invalid input is an
// *apiError; nothing is stored then.
func storeTemplate(ctx context.Context, pool *pgxpool.Pool, name string, req templateRequest, maxContent int) (templateJSON, error) {
	var fe fieldErrors
	checkTemplateName(&fe, "name", name)
	t := templateJSON{Name: name}
	if req.Category == nil {
		fe.add("category", "is required")
	} else {
		t.Category = *req.Category
		checkCategory(&fe, "category", t.Category)
	}
	channels := parseChannels(&fe, "channels", req.Channels, req.Channels != nil)
	t.Channels = channelStrings(channels)
	t.Content, _ = normalizeObject(&fe, "content", req.Content, maxContent)
	if err := fe.err(); err != nil {
		return t, err
	}
	if err := checkTemplateContent(t.Content, channels); err != nil {
		return t, err
	}
	if err := pool.QueryRow(ctx, upsertTemplate, t.Name, t.Category, t.Channels, []byte(t.Content)).Scan(&t.UpdatedAt); err != nil {
		return t, fmt.Errorf("store template %q: %w", name, err)
	}
	t.UpdatedAt = t.UpdatedAt.UTC()
	return t, nil
}

// SeedTemplates creates or replaces a template for every NAME.json file of dir, read as
// the body of PUT /api/templates/NAME, and returns the names stored. It stops at the first
// invalid file, leaving the files before it stored.
func SeedTemplates(ctx context.Context, pool *pgxpool.Pool, dir fs.FS) ([]string, error) {
	files, err := fs.Glob(dir, "*.json")
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	var names []string
	for _, f := range files {
		b, err := fs.ReadFile(dir, f)
		if err != nil {
			return names, fmt.Errorf("read template %s: %w", f, err)
		}
		var req templateRequest
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return names, fmt.Errorf("template %s: %w", f, err)
		}
		name := strings.TrimSuffix(f, ".json")
		if _, err := storeTemplate(ctx, pool, name, req, DefaultMaxBodyBytes); err != nil {
			return names, fmt.Errorf("template %s: %w", f, describe(err))
		}
		names = append(names, name)
	}
	return names, nil
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

// describe spells out an *apiError's field errors, for errors read by a person rather than
// an API client.
func describe(err error) error {
	var ae *apiError
	if !errors.As(err, &ae) || len(ae.fields) == 0 {
		return err
	}
	parts := make([]string, len(ae.fields))
	for i, f := range ae.fields {
		parts[i] = f.Field + " " + f.Message
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(parts, "; "))
}
