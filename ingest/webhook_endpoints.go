package ingest

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gorilla/mux"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/endpoint"
)

// Bounds of a webhook endpoint request (docs/webhook-endpoints.md).
const (
	maxEndpointDescription = 500
	defaultAttemptsLimit   = 100
	maxAttemptsLimit       = 1000
)

// endpointRequest is the body of POST /api/webhook-endpoints as sent.
type endpointRequest struct {
	URL         *string  `json:"url"`
	EventTypes  []string `json:"eventTypes"`
	Description *string  `json:"description"`
}

// endpointJSON is an endpoint as the API shows it.
type endpointJSON struct {
	endpoint.Endpoint
	Enabled bool `json:"enabled"`
}

func showEndpoint(e endpoint.Endpoint) endpointJSON {
	if e.EventTypes == nil {
		e.EventTypes = []herald.EventType{}
	}
	return endpointJSON{Endpoint: e, Enabled: e.DisabledAt == nil}
}

var errEndpointNotFound = newAPIError(http.StatusNotFound, codeNotFound, "no such webhook endpoint")

// decodeEndpoint validates the body: an absolute http(s) URL (every dial to it goes through
// the public-address guard of the events role), known event types (none: every type), a
// bounded description.
func decodeEndpoint(w http.ResponseWriter, r *http.Request, maxBytes int64) (url, desc string, types []herald.EventType, err error) {
	var req endpointRequest
	if err := decodeBody(w, r, maxBytes, &req); err != nil {
		return "", "", nil, err
	}
	var fe fieldErrors
	if req.URL == nil || *req.URL == "" {
		fe.add("url", "is required")
	} else {
		url = *req.URL
		checkWebhookURL(&fe, "url", url)
	}
	for i, s := range req.EventTypes {
		t, err := herald.ParseEventType(s)
		if err != nil {
			fe.add("eventTypes["+strconv.Itoa(i)+"]", "must be one of the herald.delivery.* event types")
		} else if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	if req.Description != nil {
		desc = *req.Description
		if utf8.RuneCountInString(desc) > maxEndpointDescription || !utf8.ValidString(desc) {
			fe.add("description", "must be at most %d characters", maxEndpointDescription)
		}
	}
	return url, desc, types, fe.err()
}

// postEndpoint registers a webhook endpoint of the calling client: 201 with it.
func (a *API) postEndpoint(w http.ResponseWriter, r *http.Request) {
	url, desc, types, err := decodeEndpoint(w, r, a.cfg.MaxBodyBytes)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	client := clientFrom(r.Context())
	e, err := endpoint.Create(r.Context(), a.pool, client, url, desc, types)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("webhook endpoint created", zap.String("endpoint_id", e.ID), zap.String("client_id", client))
	w.Header().Set("Location", "/api/webhook-endpoints/"+e.ID)
	writeJSON(w, http.StatusCreated, showEndpoint(e))
}

// listEndpoints answers the calling client's endpoints.
func (a *API) listEndpoints(w http.ResponseWriter, r *http.Request) {
	es, err := endpoint.List(r.Context(), a.pool, clientFrom(r.Context()))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]endpointJSON, len(es))
	for i, e := range es {
		out[i] = showEndpoint(e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"endpoints": out})
}

func (a *API) getEndpoint(w http.ResponseWriter, r *http.Request) {
	e, err := endpoint.Get(r.Context(), a.pool, clientFrom(r.Context()), mux.Vars(r)["id"])
	if err != nil {
		a.fail(w, r, endpointProblem(err))
		return
	}
	writeJSON(w, http.StatusOK, showEndpoint(e))
}

// deleteEndpoint removes an endpoint: 204, nothing more is sent to it.
func (a *API) deleteEndpoint(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	if err := endpoint.Delete(r.Context(), a.pool, clientFrom(r.Context()), id); err != nil {
		a.fail(w, r, endpointProblem(err))
		return
	}
	a.log.Info("webhook endpoint deleted", zap.String("endpoint_id", id), zap.String("client_id", clientFrom(r.Context())))
	w.WriteHeader(http.StatusNoContent)
}

// enableEndpoint lets an endpoint that a 410 disabled receive again: 200 with it.
func (a *API) enableEndpoint(w http.ResponseWriter, r *http.Request) {
	e, err := endpoint.Enable(r.Context(), a.pool, clientFrom(r.Context()), mux.Vars(r)["id"])
	if err != nil {
		a.fail(w, r, endpointProblem(err))
		return
	}
	writeJSON(w, http.StatusOK, showEndpoint(e))
}

// getEndpointAttempts answers the endpoint's attempts log, newest first (?limit=, default
// 100, at most 1000).
func (a *API) getEndpointAttempts(w http.ResponseWriter, r *http.Request) {
	limit := defaultAttemptsLimit
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxAttemptsLimit {
			a.fail(w, r, invalid(fieldError{Field: "limit", Message: "must be an integer from 1 to " + strconv.Itoa(maxAttemptsLimit)}))
			return
		}
		limit = n
	}
	client, id := clientFrom(r.Context()), mux.Vars(r)["id"]
	if _, err := endpoint.Get(r.Context(), a.pool, client, id); err != nil {
		a.fail(w, r, endpointProblem(err))
		return
	}
	as, err := endpoint.Attempts(r.Context(), a.pool, client, id, limit)
	if err != nil {
		a.fail(w, r, endpointProblem(err))
		return
	}
	if as == nil {
		as = []endpoint.Attempt{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"attempts": as})
}

// replayRequest is the body of POST /api/webhook-endpoints/{id}/replay.
type replayRequest struct {
	Since *string `json:"since"`
}

// postReplay owes the endpoint again every event of the client since a time (202 with how
// many); the events role sends them within its sweep interval.
func (a *API) postReplay(w http.ResponseWriter, r *http.Request) {
	var req replayRequest
	if err := decodeBody(w, r, a.cfg.MaxBodyBytes, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	var fe fieldErrors
	if req.Since == nil {
		fe.add("since", "is required")
	}
	since := parseTimestamp(&fe, "since", req.Since)
	if since != nil && since.After(time.Now()) {
		fe.add("since", "must not be in the future")
	}
	if err := fe.err(); err != nil {
		a.fail(w, r, err)
		return
	}
	e, err := endpoint.Get(r.Context(), a.pool, clientFrom(r.Context()), mux.Vars(r)["id"])
	if err != nil {
		a.fail(w, r, endpointProblem(err))
		return
	}
	n, err := endpoint.Replay(r.Context(), a.pool, e, *since)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("webhook endpoint replay", zap.String("endpoint_id", e.ID), zap.Int("events", n))
	writeJSON(w, http.StatusAccepted, map[string]any{"replayed": n})
}

func endpointProblem(err error) error {
	if errors.Is(err, endpoint.ErrNotFound) {
		return errEndpointNotFound
	}
	return err
}
