package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"
	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/partition"
)

// notificationJSON is the answer of GET /api/notifications/{id}.
type notificationJSON struct {
	ID         string           `json:"id"`
	UserID     int64            `json:"userId"`
	Template   string           `json:"template"`
	Category   string           `json:"category"`
	Priority   herald.Priority  `json:"priority"`
	Payload    json.RawMessage  `json:"payload"`
	SendAt     *time.Time       `json:"sendAt"`
	ExpiresAt  *time.Time       `json:"expiresAt"`
	CreatedAt  time.Time        `json:"createdAt"`
	Deliveries []deliveryJSON   `json:"deliveries"`
	Suppressed []suppressedJSON `json:"suppressed"`
}

type deliveryJSON struct {
	ID            string         `json:"id"`
	Channel       herald.Channel `json:"channel"`
	Status        herald.Status  `json:"status"`
	Attempts      int            `json:"attempts"`
	NextAttemptAt *time.Time     `json:"nextAttemptAt"` // null once the delivery is final
	LastError     *string        `json:"lastError"`
	SentAt        *time.Time     `json:"sentAt"`
	UpdatedAt     time.Time      `json:"updatedAt"`
}

// selectNotification is scoped to the client: another client's id reads as unknown.
const selectNotification = `
SELECT user_id, template, category, priority, payload, send_at, expires_at, created_at, response
FROM notification WHERE id = $1 AND client_id = $2`

// selectDeliveries reads the deliveries of notification $1. delivery is partitioned by the
// day of its id, and a delivery is made with its notification (the same insert), so its id
// lies in the notification's day or, made a moment after midnight, the next: $2 and $3
// bound the ids to those two days, and the look-up reads at most two partitions instead of
// every day's.
const selectDeliveries = `
SELECT id::text, channel, status, attempts, next_attempt_at, last_error, sent_at, updated_at
FROM delivery WHERE notification_id = $1 AND id >= $2 AND id < $3
ORDER BY array_position(ARRAY['PUSH', 'EMAIL', 'SMS', 'WEBHOOK'], channel)`

func (a *API) getNotification(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := uuid.Parse(mux.Vars(r)["id"])
	if err != nil {
		a.fail(w, r, newAPIError(http.StatusNotFound, codeNotFound, "no such notification"))
		return
	}
	n := notificationJSON{ID: id.String()}
	var (
		priority string
		payload  []byte
		response []byte
	)
	err = a.pool.QueryRow(ctx, selectNotification, id.String(), clientFrom(ctx)).Scan(
		&n.UserID, &n.Template, &n.Category, &priority, &payload, &n.SendAt, &n.ExpiresAt, &n.CreatedAt, &response)
	if errors.Is(err, pgx.ErrNoRows) {
		a.fail(w, r, newAPIError(http.StatusNotFound, codeNotFound, "no such notification"))
		return
	}
	if err != nil {
		a.fail(w, r, fmt.Errorf("read notification %s: %w", id, err))
		return
	}
	n.Priority = herald.Priority(priority)
	n.Payload = payload
	n.CreatedAt, n.SendAt, n.ExpiresAt = n.CreatedAt.UTC(), utcPtr(n.SendAt), utcPtr(n.ExpiresAt)
	var accepted acceptedJSON
	if err := json.Unmarshal(response, &accepted); err != nil {
		a.fail(w, r, fmt.Errorf("decode stored answer of notification %s: %w", id, err))
		return
	}
	n.Suppressed = accepted.Suppressed
	if n.Suppressed == nil {
		n.Suppressed = []suppressedJSON{}
	}

	day := partition.DayOfID(id)
	rows, err := a.pool.Query(ctx, selectDeliveries, id.String(), day.Lower(), day.Add(2).Lower())
	if err != nil {
		a.fail(w, r, fmt.Errorf("read deliveries of notification %s: %w", id, err))
		return
	}
	n.Deliveries, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (deliveryJSON, error) {
		var (
			d               deliveryJSON
			channel, status string
			next            time.Time
		)
		err := row.Scan(&d.ID, &channel, &status, &d.Attempts, &next, &d.LastError, &d.SentAt, &d.UpdatedAt)
		d.Channel, d.Status = herald.Channel(channel), herald.Status(status)
		if !d.Status.Terminal() {
			d.NextAttemptAt = utcPtr(&next)
		}
		d.SentAt, d.UpdatedAt = utcPtr(d.SentAt), d.UpdatedAt.UTC()
		return d, err
	})
	if err != nil {
		a.fail(w, r, fmt.Errorf("read deliveries of notification %s: %w", id, err))
		return
	}
	writeJSON(w, http.StatusOK, n)
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
