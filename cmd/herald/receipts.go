package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/receipts"
)

// receiptFlags are the settings of the receipt endpoints beside the providers' secrets
// (senderFlags: --public-url, --twilio-auth-token, --vonage-signature-secret,
// --sendgrid-webhook-public-key).
type receiptFlags struct {
	Hold time.Duration
}

func (r *receiptFlags) register(f *envFlags) {
	f.Duration(&r.Hold, "receipt-hold", receipts.DefaultHold, "how long a provider receipt is kept when its send is not recorded yet (or its delivery id is unknown), to be applied when the send is recorded")
}

// newReceiver builds the receipt endpoints of the providers configured with their secret,
// in providers mode: Twilio (auth token), Vonage (signature secret), SendGrid (Event Webhook
// public key).
func newReceiver(c serveConfig, pool *pgxpool.Pool, log *zap.Logger) (*receipts.Receiver, error) {
	s := c.Senders
	cfg := receipts.Config{PublicURL: s.PublicURL, Hold: c.Receipts.Hold}
	if s.Mode == sendersProviders {
		if s.Twilio.AccountSID != "" {
			cfg.TwilioAuthToken, cfg.TwilioProvider = s.Twilio.Password, s.Twilio.Provider
		}
		if s.Vonage.APIKey != "" {
			cfg.VonageSignatureSecret, cfg.VonageProvider = s.VonageSignatureSecret, s.Vonage.Provider
		}
		if s.SendGridWebhookPublicKey != "" {
			key, err := parseECDSAPublicKey(s.SendGridWebhookPublicKey)
			if err != nil {
				return nil, fmt.Errorf("--sendgrid-webhook-public-key: %w", err)
			}
			cfg.SendGridPublicKey, cfg.SendGridProvider = key, s.SendGrid.Provider
		}
	}
	if c.Receipts.Hold <= 0 {
		return nil, fmt.Errorf("--receipt-hold %s: must be positive", c.Receipts.Hold)
	}
	return receipts.New(cfg, pool, log)
}

// mountReceipts adds the receipt endpoints to the API listener's mux, before the API's
// catch-all: authenticated by each provider's signature, never by an API key.
func mountReceipts(mux *http.ServeMux, rx *receipts.Receiver, log *zap.Logger) {
	for _, rt := range rx.Routes() {
		mux.Handle(rt.Method+" "+rt.Path, rt.Handler)
		log.Info("receipt endpoint", zap.String("method", rt.Method), zap.String("path", rt.Path))
	}
}
