package endpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/heraldhq/herald"
)

// ErrNotFound is returned for an endpoint that does not exist or belongs to another client.
var ErrNotFound = errors.New("webhook endpoint not found")

// DB is what the store runs its statements on: a pool, a connection or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Endpoint is one client webhook endpoint.
type Endpoint struct {
	ID          string             `json:"id"`
	ClientID    string             `json:"-"`
	URL         string             `json:"url"`
	Description string             `json:"description"`
	EventTypes  []herald.EventType `json:"eventTypes"`
	CreatedAt   time.Time          `json:"createdAt"`
	// DisabledAt is set when the endpoint answered 410 Gone; Enable clears it.
	DisabledAt *time.Time `json:"disabledAt,omitempty"`
	// FailingSince is the first failed attempt since the last successful one.
	FailingSince *time.Time `json:"failingSince,omitempty"`
}

// Wants reports whether the endpoint takes events of type t (an empty filter takes all).
func (e *Endpoint) Wants(t herald.EventType) bool {
	if len(e.EventTypes) == 0 {
		return true
	}
	for _, w := range e.EventTypes {
		if w == t {
			return true
		}
	}
	return false
}

const endpointColumns = `id::text, client_id::text, url, description, event_types, created_at, disabled_at, failing_since`

func scanEndpoint(r pgx.Row) (Endpoint, error) {
	var e Endpoint
	var types []string
	err := r.Scan(&e.ID, &e.ClientID, &e.URL, &e.Description, &types, &e.CreatedAt, &e.DisabledAt, &e.FailingSince)
	e.EventTypes = make([]herald.EventType, len(types))
	for i, t := range types {
		e.EventTypes[i] = herald.EventType(t)
	}
	e.CreatedAt = e.CreatedAt.UTC()
	return e, err
}

const insertEndpoint = `
INSERT INTO webhook_endpoint (id, client_id, url, description, event_types) VALUES ($1, $2, $3, $4, $5)
RETURNING ` + endpointColumns

// Create registers an endpoint of clientID. The caller has validated url and types.
func Create(ctx context.Context, db DB, clientID, url, description string, types []herald.EventType) (Endpoint, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Endpoint{}, fmt.Errorf("create webhook endpoint: %w", err)
	}
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = string(t)
	}
	e, err := scanEndpoint(db.QueryRow(ctx, insertEndpoint, id, clientID, url, description, names))
	if err != nil {
		return Endpoint{}, fmt.Errorf("create webhook endpoint of client %s: %w", clientID, err)
	}
	return e, nil
}

const listEndpoints = `SELECT ` + endpointColumns + ` FROM webhook_endpoint WHERE client_id = $1 ORDER BY id`

// List returns the endpoints of clientID, oldest first.
func List(ctx context.Context, db DB, clientID string) ([]Endpoint, error) {
	rows, err := db.Query(ctx, listEndpoints, clientID)
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints of client %s: %w", clientID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Endpoint, error) { return scanEndpoint(r) })
	if err != nil {
		return nil, fmt.Errorf("list webhook endpoints of client %s: %w", clientID, err)
	}
	return out, nil
}

const getEndpoint = `SELECT ` + endpointColumns + ` FROM webhook_endpoint WHERE id = $1 AND client_id = $2`

// Get returns endpoint id of clientID, or ErrNotFound (also for another client's endpoint).
func Get(ctx context.Context, db DB, clientID, id string) (Endpoint, error) {
	if _, err := uuid.Parse(id); err != nil {
		return Endpoint{}, ErrNotFound
	}
	e, err := scanEndpoint(db.QueryRow(ctx, getEndpoint, id, clientID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, ErrNotFound
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("get webhook endpoint %s: %w", id, err)
	}
	return e, nil
}

const deleteEndpoint = `DELETE FROM webhook_endpoint WHERE id = $1 AND client_id = $2`

// Delete removes endpoint id of clientID with its messages and attempts: nothing more is sent
// to it.
func Delete(ctx context.Context, db DB, clientID, id string) error {
	if _, err := uuid.Parse(id); err != nil {
		return ErrNotFound
	}
	tag, err := db.Exec(ctx, deleteEndpoint, id, clientID)
	if err != nil {
		return fmt.Errorf("delete webhook endpoint %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

const enableEndpoint = `
UPDATE webhook_endpoint SET disabled_at = NULL WHERE id = $1 AND client_id = $2
RETURNING ` + endpointColumns

// Enable lets a disabled endpoint receive again: its PENDING messages are sent from now on.
// Enabling an enabled endpoint changes nothing.
func Enable(ctx context.Context, db DB, clientID, id string) (Endpoint, error) {
	if _, err := uuid.Parse(id); err != nil {
		return Endpoint{}, ErrNotFound
	}
	e, err := scanEndpoint(db.QueryRow(ctx, enableEndpoint, id, clientID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, ErrNotFound
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("enable webhook endpoint %s: %w", id, err)
	}
	return e, nil
}

const disableEndpoint = `UPDATE webhook_endpoint SET disabled_at = now() WHERE id = $1 AND disabled_at IS NULL`

// Disable stops deliveries to an endpoint that answered 410 Gone. It reports whether this
// call disabled it (false: already disabled, or deleted).
func Disable(ctx context.Context, db DB, id string) (bool, error) {
	tag, err := db.Exec(ctx, disableEndpoint, id)
	if err != nil {
		return false, fmt.Errorf("disable webhook endpoint %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

const markFailing = `UPDATE webhook_endpoint SET failing_since = now() WHERE id = $1 AND failing_since IS NULL`

const markHealthy = `UPDATE webhook_endpoint SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL`

// SetFailing records the health of an endpoint after an attempt: failing_since is set at the
// first failure after a success and cleared by the next success.
func SetFailing(ctx context.Context, db DB, id string, failing bool) error {
	q := markHealthy
	if failing {
		q = markFailing
	}
	if _, err := db.Exec(ctx, q, id); err != nil {
		return fmt.Errorf("record health of webhook endpoint %s: %w", id, err)
	}
	return nil
}

const enabledEndpoints = `SELECT ` + endpointColumns + ` FROM webhook_endpoint WHERE disabled_at IS NULL ORDER BY id`

// Enabled returns every enabled endpoint of every client: what the events role matches
// events against (it keeps them for a short while).
func Enabled(ctx context.Context, db DB) ([]Endpoint, error) {
	rows, err := db.Query(ctx, enabledEndpoints)
	if err != nil {
		return nil, fmt.Errorf("list enabled webhook endpoints: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Endpoint, error) { return scanEndpoint(r) })
	if err != nil {
		return nil, fmt.Errorf("list enabled webhook endpoints: %w", err)
	}
	return out, nil
}

const failingEndpoints = `SELECT id::text, failing_since FROM webhook_endpoint WHERE failing_since IS NOT NULL`

// Failing returns the start of the current failure of every failing endpoint, by id.
func Failing(ctx context.Context, db DB) (map[string]time.Time, error) {
	rows, err := db.Query(ctx, failingEndpoints)
	if err != nil {
		return nil, fmt.Errorf("list failing webhook endpoints: %w", err)
	}
	out := map[string]time.Time{}
	var id string
	var since time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &since}, func() error { out[id] = since; return nil })
	if err != nil {
		return nil, fmt.Errorf("list failing webhook endpoints: %w", err)
	}
	return out, nil
}
