package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/recipient"
)

const selectByIdempotencyKey = `
SELECT k.request_hash, n.response FROM idempotency_key k JOIN notification n ON n.id = k.notification_id
WHERE k.client_id = $1 AND k.idempotency_key = $2`

func (a *API) postNotification(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if err := checkJSONContentType(r.Header.Get("Content-Type")); err != nil {
		a.fail(w, r, err)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if !validIdempotencyKey(key) {
		a.fail(w, r, invalid(fieldError{Field: "Idempotency-Key", Message: "header is required: 1-100 printable ASCII characters"}))
		return
	}
	body := http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes)
	defer body.Close()
	in, err := decodeNotification(body, a.cfg.MaxPayloadBytes)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.acceptsPriority(in.Priority); err != nil {
		a.fail(w, r, err)
		return
	}
	// The request holds its admission slot already, taken before any of this work
	// (admission_gate.go).

	// The stored traceparent is the request span's context: the incoming trace continued,
	// or a new root that otelhttp started.
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)

	res, err := a.accept(ctx, clientFrom(ctx), key, in, carrier.Get("traceparent"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if res.awaitDurable {
		if err := a.awaitDurable(ctx, res.id); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	w.Header().Set("Location", "/api/notifications/"+res.id)
	if res.replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSONBytes(w, http.StatusAccepted, res.body)
}

// accepted is the outcome of accept: the notification id and the 202 body, encoded once.
type accepted struct {
	id       string
	body     []byte
	replayed bool
	// awaitDurable: the answer must wait for the WAL flush (awaitDurable) of a commit that
	// may not have waited for it: the one of the HIGH notification this request replays.
	awaitDurable bool
}

// answer encodes resp as the 202 body.
func answer(resp *recipient.Accepted, replayed bool) (accepted, error) {
	b, err := json.Marshal(resp)
	if err != nil {
		return accepted{}, fmt.Errorf("encode answer of notification %s: %w", resp.ID, err)
	}
	return accepted{id: resp.ID, body: b, replayed: replayed}, nil
}

// replayAnswer is replay encoded as the 202 body.
func replayAnswer(hash, storedHash, storedResp []byte) (accepted, error) {
	resp, err := replay(hash, storedHash, storedResp)
	if err != nil {
		return accepted{}, err
	}
	return answer(resp, true)
}

// accept stores the notification and its deliveries in one statement, or finds the earlier
// answer for the same Idempotency-Key. The template is rendered before the write, outside
// any transaction (accept_tx.go).
func (a *API) accept(ctx context.Context, clientID, key string, in *notificationInput, traceparent string) (_ accepted, err error) {
	request := ctx
	ctx, span := a.tracer.Start(ctx, "ingest.accept")
	defer func() {
		// A rejected request (an *apiError) is the client's error, not the span's.
		var ae *apiError
		if err != nil && !errors.As(err, &ae) {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	hash := in.hash()

	// A NORMAL or LOW request that could not be answered by its answer-by time is refused
	// before each database step (admission_deadline.go).
	if err := a.admit.inTime(ctx, a.admit.read.bound()+a.admit.insert.bound()); err != nil {
		return accepted{}, err
	}
	db := a.poolFor(in.Priority) // the accepts' own connections, when they have them (admission_pool.go)
	ac, err := timed(&a.admit.read, func() (*acceptContext, error) { return readAcceptContext(ctx, db, clientID, key, in) })
	if err != nil {
		return accepted{}, err
	}
	span.AddEvent("accept context read")
	prompt := a.promptAccept(in)
	if ac.existingHash != nil {
		res, err := replayAnswer(hash, ac.existingHash, ac.existingResponse)
		res.awaitDurable = prompt
		return res, err
	}
	if ac.templateCategory == nil {
		return accepted{}, newAPIError(http.StatusUnprocessableEntity, codeUnknownTemplate,
			fmt.Sprintf("template %q does not exist", in.Template))
	}
	var fe fieldErrors
	for _, c := range in.Channels {
		if !containsChannel(ac.templateChannels, c) {
			fe.add("channels", "template %q does not support %s", in.Template, c)
		}
	}
	if in.ExpiresAt != nil && !in.ExpiresAt.After(ac.now) {
		fe.add("expiresAt", "must be in the future")
	}
	if err := fe.err(); err != nil {
		return accepted{}, err
	}
	if err := requireAvailable(in.Channels, a.available); err != nil {
		return accepted{}, err
	}
	category := in.Category
	if category == "" {
		category = *ac.templateCategory
	}
	d, err := recipient.Decide(recipient.Request{UserID: in.UserID, Channels: in.Channels, Available: a.available,
		Category: category, Priority: in.Priority, SendAt: in.SendAt, To: in.To.addresses()}, &ac.facts, ac.now, a.log)
	if err != nil {
		return accepted{}, err
	}
	if err := checkRender(ac.templateContent, ac.locale, d.Deliver, in.payload); err != nil {
		return accepted{}, err
	}

	res, note, err := newNotificationRows(clientID, key, hash, category, traceparent, in, d)
	if err != nil {
		return accepted{}, err
	}
	if err := a.admit.inTime(ctx, a.admit.insert.bound()); err != nil {
		return accepted{}, err
	}
	span.SetAttributes(attribute.String("herald.notification_id", res.id), attribute.Int("herald.deliveries", len(d.Deliver)))
	span.AddEvent("insert started")
	insert := func() (bool, error) { return delivery.Insert(ctx, db, note) }
	pipelined := prompt && note.NextAttemptAt == nil // due at once: published before its flush
	if pipelined {
		insert = func() (bool, error) { return a.insertPrompt(request, ctx, span, db, note) }
	}
	inserted, err := timed(&a.admit.insert, insert)
	if err != nil {
		return accepted{}, fmt.Errorf("insert notification %s: %w", res.id, err)
	}
	if !inserted {
		// A concurrent request with the same key committed first (the insert waited for it);
		// its answer is ours. This transaction wrote nothing.
		span.AddEvent("idempotency conflict")
		var storedHash, storedResp []byte
		if err := db.QueryRow(ctx, selectByIdempotencyKey, clientID, key).Scan(&storedHash, &storedResp); err != nil {
			return accepted{}, fmt.Errorf("read notification for idempotency key of client %s: %w", clientID, err)
		}
		res, err := replayAnswer(hash, storedHash, storedResp)
		res.awaitDurable = prompt && !pipelined // the pipeline waited for the flush after the conflict
		return res, err
	}
	if ce := a.log.Check(zap.DebugLevel, "notification accepted"); ce != nil { // no fields built when debug is off
		ce.Write(zap.String("notification_id", res.id), zap.String("client_id", clientID),
			zap.Int("deliveries", len(d.Deliver)), zap.Int("suppressed", len(d.Suppressed)), zap.Bool("deferred", d.Next != nil))
	}
	return res, nil
}

// newNotificationRows builds the answer and the rows to insert (delivery.Insert) for the
// decision d (recipient.Decision.Rows: the answer is encoded once, and the same bytes are
// stored in notification.response and sent as the 202 body).
func newNotificationRows(clientID, key string, hash []byte, category, traceparent string, in *notificationInput,
	d recipient.Decision) (accepted, delivery.Notification, error) {
	rows, err := d.Rows()
	if err != nil {
		return accepted{}, delivery.Notification{}, err
	}
	var recipientJSON []byte
	if in.To != nil {
		b, err := json.Marshal(in.To)
		if err != nil {
			return accepted{}, delivery.Notification{}, fmt.Errorf("encode recipient of notification %s: %w", rows.NotificationID, err)
		}
		recipientJSON = b
	}
	res := accepted{id: rows.NotificationID.String(), body: rows.Answer}
	return res, delivery.Notification{
		ID: rows.NotificationID, ClientID: clientID, IdempotencyKey: key, RequestHash: hash, UserID: in.UserID,
		Template: in.Template, Category: category, Payload: []byte(in.Payload), Recipient: recipientJSON,
		Priority: in.Priority, Traceparent: traceparent, SendAt: in.SendAt, ExpiresAt: in.ExpiresAt,
		Response: rows.Answer, NextAttemptAt: d.Next, Deliveries: rows.Deliveries,
	}, nil
}

// replay returns the stored answer when the request hash matches the stored one, and
// idempotency_key_reused otherwise. The stored answer is re-encoded from its struct, so the
// replayed body is byte for byte the original.
func replay(hash, storedHash, storedResp []byte) (*recipient.Accepted, error) {
	if !bytes.Equal(hash, storedHash) {
		return nil, newAPIError(http.StatusUnprocessableEntity, codeIdempotencyKeyReused,
			"this Idempotency-Key was already used with a different request body")
	}
	var resp recipient.Accepted
	if err := json.Unmarshal(storedResp, &resp); err != nil {
		return nil, fmt.Errorf("decode stored answer: %w", err)
	}
	if resp.Deliveries == nil || resp.Suppressed == nil {
		return nil, errors.New("decode stored answer: missing members")
	}
	return &resp, nil
}
