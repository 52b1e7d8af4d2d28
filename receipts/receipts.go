// Package receipts takes in the delivery receipts of the providers that report what became of
// a message they accepted (docs/receipts.md): Twilio status callbacks, Vonage delivery
// receipts and SendGrid's Event Webhook, each at its public endpoint under /providers/ on the
// API listener, authenticated by the provider's own signature and never by an API key.
//
// A receipt carries herald's delivery id (Twilio: the deliveryId query parameter of the
// StatusCallback URL, which the signature covers; Vonage: client-ref; SendGrid: the
// herald_delivery_id custom argument), so that it finds its delivery by primary key, on one
// day's partition. internal/delivery's ApplyReceipt applies it: SENT → DELIVERED |
// UNDELIVERED, a duplicate changes nothing, nothing moves back, and a receipt that beats the
// send's commit is held (--receipt-hold) and applied when the send is recorded. A bad or
// missing signature is answered 403 bad_signature and changes nothing.
package receipts

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/senders/twilio"
)

// Paths of the receipt endpoints, under the public URL.
const (
	TwilioPath   = "/providers/twilio/status"
	VonagePath   = "/providers/vonage/dlr"
	SendGridPath = "/providers/sendgrid/events"
)

// DeliveryIDParam is the query parameter of Twilio's StatusCallback URL that carries the
// delivery id.
const DeliveryIDParam = twilio.DeliveryIDParam

// DefaultHold is how long a receipt whose send is not recorded yet is kept (--receipt-hold).
const DefaultHold = 10 * time.Minute

// Config configures the receivers. A provider whose secret is empty has no endpoint.
type Config struct {
	// PublicURL is the address providers reach herald at (--public-url): Twilio signs the
	// URL it calls, which is PublicURL + the path and query herald sees.
	PublicURL string
	// TwilioAuthToken signs Twilio's callbacks; TwilioProvider is its account name
	// (default "sms:twilio").
	TwilioAuthToken, TwilioProvider string
	// VonageSignatureSecret signs Vonage's receipts (HMAC-SHA256); VonageProvider is its
	// account name (default "sms:vonage").
	VonageSignatureSecret, VonageProvider string
	// SendGridPublicKey verifies SendGrid's events (ECDSA P-256); SendGridProvider is its
	// account name (default "email:sendgrid").
	SendGridPublicKey *ecdsa.PublicKey
	SendGridProvider  string
	// Hold is how long a receipt whose send is not recorded yet is kept. Default DefaultHold.
	Hold time.Duration
	// SweepInterval is how often Run applies held receipts of sent deliveries and drops
	// expired ones. Default 1 s.
	SweepInterval time.Duration
}

// Route is one receipt endpoint, for the API's router.
type Route struct {
	Method, Path string
	Handler      http.Handler
}

// Key is how the API's router names a route: "METHOD /path".
func (r Route) Key() string { return r.Method + " " + r.Path }

// Endpoints are every receipt endpoint, served or not (Handler nil): the API routes them all
// and answers 404 for a provider that is not configured.
var Endpoints = []Route{
	{Method: http.MethodPost, Path: TwilioPath},
	{Method: http.MethodGet, Path: VonagePath},
	{Method: http.MethodPost, Path: VonagePath},
	{Method: http.MethodPost, Path: SendGridPath},
}

// Receiver serves the receipt endpoints and sweeps the held receipts.
type Receiver struct {
	cfg  Config
	pool *pgxpool.Pool
	log  *zap.Logger
}

// New returns a Receiver.
func New(cfg Config, pool *pgxpool.Pool, log *zap.Logger) (*Receiver, error) {
	if pool == nil {
		return nil, errors.New("receipts: nil pool")
	}
	if cfg.Hold < 0 || cfg.SweepInterval < 0 {
		return nil, errors.New("receipts: Hold and SweepInterval must not be negative")
	}
	if cfg.Hold == 0 {
		cfg.Hold = DefaultHold
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = time.Second
	}
	cfg.TwilioProvider = orDefault(cfg.TwilioProvider, "sms:twilio")
	cfg.VonageProvider = orDefault(cfg.VonageProvider, "sms:vonage")
	cfg.SendGridProvider = orDefault(cfg.SendGridProvider, "email:sendgrid")
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	return &Receiver{cfg: cfg, pool: pool, log: log.With(zap.String("component", "receipts"))}, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Routes are the endpoints of the providers configured with a secret (Twilio's also needs
// the public URL, which its signature covers).
func (x *Receiver) Routes() []Route {
	var out []Route
	if x.cfg.TwilioAuthToken != "" && x.cfg.PublicURL != "" {
		out = append(out, Route{http.MethodPost, TwilioPath, x.endpoint(x.cfg.TwilioProvider, x.twilio)})
	}
	if x.cfg.VonageSignatureSecret != "" {
		h := x.endpoint(x.cfg.VonageProvider, x.vonage)
		out = append(out, Route{http.MethodPost, VonagePath, h}, Route{http.MethodGet, VonagePath, h})
	}
	if x.cfg.SendGridPublicKey != nil {
		out = append(out, Route{http.MethodPost, SendGridPath, x.endpoint(x.cfg.SendGridProvider, x.sendgrid)})
	}
	return out
}

// errBadSignature: the request's signature is missing or does not verify.
var errBadSignature = errors.New("bad or missing signature")

// parser verifies one provider's request and reads its receipts. It returns errBadSignature
// for a request that must change nothing; any other error is a signed request herald cannot
// read (answered 200, counted malformed).
type parser func(r *http.Request, body []byte) ([]delivery.Receipt, error)

// maxBody bounds a receipt request (a SendGrid batch holds up to a few hundred events).
const maxBody = 1 << 20

// endpoint verifies, parses and applies: 403 for a bad signature, 200 for everything signed
// (applied, logged, duplicate, held, malformed), so that the provider stops retrying; 503 when
// the database failed, so that it retries.
func (x *Receiver) endpoint(provider string, parse parser) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
			delivery.CountReceipt(r.Context(), provider, delivery.ReceiptRejected, "")
			writeProblem(w, http.StatusRequestEntityTooLarge, ProblemBodyTooLarge, "the receipt request exceeds 1 MiB")
			return
		}
		if err != nil {
			// The body did not arrive whole (the provider went away, or was too slow): nothing
			// changed, and a 503 asks for the receipt again, if anyone is still listening.
			x.log.Info("receipt body not read", zap.String("provider", provider), zap.Error(err))
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rs, err := parse(r, body)
		if errors.Is(err, errBadSignature) {
			delivery.CountReceipt(r.Context(), provider, delivery.ReceiptRejected, "")
			writeProblem(w, http.StatusForbidden, ProblemBadSignature, "the receipt's signature is missing or does not verify")
			return
		}
		if err != nil {
			delivery.CountReceipt(r.Context(), provider, delivery.ReceiptMalformed, "")
			x.log.Info("signed receipt not understood", zap.String("provider", provider), zap.String("reason", err.Error()))
			w.WriteHeader(http.StatusOK)
			return
		}
		for _, rc := range rs {
			rc.Provider = provider
			if _, err := uuid.Parse(rc.DeliveryID); err != nil {
				delivery.CountReceipt(r.Context(), provider, delivery.ReceiptMalformed, "")
				continue
			}
			if err := x.apply(r.Context(), rc); err != nil {
				x.log.Warn("receipt not applied", zap.String("provider", provider), zap.String("delivery_id", rc.DeliveryID), zap.Error(err))
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
	})
}

func (x *Receiver) apply(ctx context.Context, r delivery.Receipt) error {
	o, err := delivery.ApplyReceipt(ctx, x.pool, r, x.cfg.Hold)
	if err != nil {
		return err
	}
	delivery.CountReceipt(ctx, r.Provider, o, r.Result)
	return nil
}

// ProblemBadSignature is the problem code of a receipt without a valid signature, one of the
// API's codes (ingest/problem.go, docs/openapi.yaml).
const ProblemBadSignature = "bad_signature"

// ProblemBodyTooLarge is the problem code of a receipt request over 1 MiB, the API's
// body_too_large.
const ProblemBodyTooLarge = "body_too_large"

// writeProblem answers an RFC 9457 problem with one of the API's codes.
func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "urn:herald:problem:" + code, "title": http.StatusText(status),
		"status": status, "code": code, "detail": detail,
	})
}

// sweepBatch bounds the held receipts one sweep applies or drops.
const sweepBatch = 500

// Run sweeps the held receipts every SweepInterval until ctx is done: it applies those whose
// send was recorded by a process that stopped before applying them, and drops (and counts)
// those past their hold. Several processes may run it: each takes rows the others do not hold.
func (x *Receiver) Run(ctx context.Context) error {
	t := time.NewTicker(x.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := x.sweep(ctx); err != nil && ctx.Err() == nil {
			x.log.Warn("held receipts sweep failed; next sweep tries again", zap.Error(err))
		}
	}
}

func (x *Receiver) sweep(ctx context.Context) error {
	applied, err := delivery.ApplyHeldDue(ctx, x.pool, sweepBatch)
	if err != nil {
		return err
	}
	for _, a := range applied {
		delivery.CountReceipt(ctx, a.Provider, a.Outcome, a.Result)
	}
	expired, err := delivery.DropExpiredHolds(ctx, x.pool, sweepBatch)
	if err != nil {
		return err
	}
	for _, p := range expired {
		delivery.CountReceipt(ctx, p, delivery.ReceiptExpired, "")
	}
	return nil
}
