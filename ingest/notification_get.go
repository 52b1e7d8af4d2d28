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
	"github.com/heraldhq/herald/internal/recipient"
	"github.com/heraldhq/herald/internal/timeline"
)

// notificationJSON is the answer of GET /api/notifications/{id}.
type notificationJSON struct {
	ID        string          `json:"id"`
	UserID    int64           `json:"userId"`
	Template  string          `json:"template"`
	Category  string          `json:"category"`
	Priority  herald.Priority `json:"priority"`
	Payload   json.RawMessage `json:"payload"`
	SendAt    *time.Time      `json:"sendAt"`
	ExpiresAt *time.Time      `json:"expiresAt"`
	CreatedAt time.Time       `json:"createdAt"`
	// TraceID is the W3C trace id of the accepting request: the trace that follows the
	// notification through relay, dispatch and provider calls. null: none was recorded.
	TraceID    *string                `json:"traceId"`
	Deliveries []deliveryJSON         `json:"deliveries"`
	Suppressed []recipient.Suppressed `json:"suppressed"`
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
	// Provider and ProviderMessageID: who took the message and its id there (null until an
	// attempt reached a provider).
	Provider          *string       `json:"provider"`
	ProviderMessageID *string       `json:"providerMessageId"`
	AttemptLog        []attemptJSON `json:"attemptLog"`
	// Receipts are the provider's receipts (docs/receipts.md), oldest first; [] for none.
	Receipts []timeline.Receipt `json:"receipts"`
}

// attemptJSON is one attempt of a delivery (internal/timeline.Attempt): when it started and
// finished, SENT, ERROR or EXPIRED, and for an ERROR its class (TRANSIENT, PERMANENT,
// AMBIGUOUS) and the provider's code.
type attemptJSON struct {
	Started      time.Time `json:"started"`
	Finished     time.Time `json:"finished"`
	Outcome      string    `json:"outcome"`
	Provider     *string   `json:"provider"`
	ProviderCode *string   `json:"providerCode"`
	ErrorClass   *string   `json:"errorClass"`
	// RedriveID is the operator re-drive the attempt ran under; absent before any.
	RedriveID *string `json:"redriveId,omitempty"`
	// TokensRemoved is how many push tokens the attempt found invalid and herald removed.
	TokensRemoved int `json:"tokensRemoved,omitempty"`
}

// selectNotification is scoped to the client: another client's id reads as unknown.
const selectNotification = `
SELECT user_id, template, category, priority, payload, send_at, expires_at, created_at, response,
       coalesce(traceparent, '')
FROM notification WHERE id = $1 AND client_id = $2`

// selectDeliveries reads the deliveries of notification $1. delivery is partitioned by the
// day of its id, and a delivery is made with its notification (the same insert), so its id
// lies in the notification's day or, made a moment after midnight, the next: $2 and $3
// bound the ids to those two days, and the look-up reads at most two partitions instead of
// every day's.
const selectDeliveries = `
SELECT id::text, channel, status, attempts, next_attempt_at, last_error, sent_at, updated_at,
       provider, provider_message_id, coalesce(receipts, '[]')
FROM delivery WHERE notification_id = $1 AND id >= $3 AND id < $4
  AND EXISTS (SELECT 1 FROM notification WHERE id = $1 AND client_id = $2)
ORDER BY array_position(ARRAY['PUSH', 'EMAIL', 'SMS', 'WEBHOOK'], channel)`

func (a *API) getNotification(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := uuid.Parse(mux.Vars(r)["id"])
	if err != nil {
		a.fail(w, r, newAPIError(http.StatusNotFound, codeNotFound, "no such notification"))
		return
	}
	// One round trip: the notification (scoped to the client), its deliveries and their
	// attempt logs. Another client's id finds no notification row, and its deliveries and
	// attempts are never shown.
	n := notificationJSON{ID: id.String()}
	var (
		priority, traceparent string
		payload, response     []byte
		found                 bool
	)
	attempts := map[string][]timeline.Attempt{}
	b := &pgx.Batch{}
	b.Queue(selectNotification, id.String(), clientFrom(ctx)).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&n.UserID, &n.Template, &n.Category, &priority, &payload, &n.SendAt, &n.ExpiresAt,
			&n.CreatedAt, &response, &traceparent)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	day := partition.DayOfID(id)
	b.Queue(selectDeliveries, id.String(), clientFrom(ctx), day.Lower(), day.Add(2).Lower()).Query(func(rows pgx.Rows) error {
		var err error
		n.Deliveries, err = pgx.CollectRows(rows, scanDelivery)
		return err
	})
	timeline.QueueAttemptLog(b, id.String(), attempts)
	if err := a.pool.SendBatch(ctx, b).Close(); err != nil {
		a.fail(w, r, fmt.Errorf("read notification %s: %w", id, err))
		return
	}
	if !found {
		a.fail(w, r, newAPIError(http.StatusNotFound, codeNotFound, "no such notification"))
		return
	}
	n.Priority = herald.Priority(priority)
	n.Payload = payload
	n.CreatedAt, n.SendAt, n.ExpiresAt = n.CreatedAt.UTC(), utcPtr(n.SendAt), utcPtr(n.ExpiresAt)
	if t := timeline.TraceID(traceparent); t != "" {
		n.TraceID = &t
	}
	var accepted recipient.Accepted
	if err := json.Unmarshal(response, &accepted); err != nil {
		a.fail(w, r, fmt.Errorf("decode stored answer of notification %s: %w", id, err))
		return
	}
	n.Suppressed = accepted.Suppressed
	if n.Suppressed == nil {
		n.Suppressed = []recipient.Suppressed{}
	}
	if n.Deliveries == nil {
		n.Deliveries = []deliveryJSON{}
	}
	for i := range n.Deliveries {
		n.Deliveries[i].AttemptLog = attemptLog(attempts[n.Deliveries[i].ID])
	}
	writeJSON(w, http.StatusOK, n)
}

func scanDelivery(row pgx.CollectableRow) (deliveryJSON, error) {
	var (
		d               deliveryJSON
		channel, status string
		next            time.Time
	)
	err := row.Scan(&d.ID, &channel, &status, &d.Attempts, &next, &d.LastError, &d.SentAt, &d.UpdatedAt,
		&d.Provider, &d.ProviderMessageID, &d.Receipts)
	d.Channel, d.Status = herald.Channel(channel), herald.Status(status)
	if !d.Status.Terminal() {
		d.NextAttemptAt = utcPtr(&next)
	}
	d.SentAt, d.UpdatedAt = utcPtr(d.SentAt), d.UpdatedAt.UTC()
	for i := range d.Receipts {
		d.Receipts[i].At, d.Receipts[i].ReceivedAt = d.Receipts[i].At.UTC(), d.Receipts[i].ReceivedAt.UTC()
	}
	return d, err
}

func attemptLog(as []timeline.Attempt) []attemptJSON {
	out := make([]attemptJSON, len(as))
	for i, a := range as {
		out[i] = attemptJSON{Started: a.Started, Finished: a.Finished, Outcome: a.Outcome,
			Provider: nonEmpty(a.Provider), ProviderCode: nonEmpty(a.ProviderCode), ErrorClass: nonEmpty(a.ErrorClass),
			RedriveID: nonEmpty(a.RedriveID), TokensRemoved: a.TokensRemoved}
	}
	return out
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
