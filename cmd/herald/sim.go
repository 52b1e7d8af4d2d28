package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/heraldhq/herald/receipts"
	"github.com/heraldhq/herald/senders/sim"
)

// Simulator development credentials: the simulator accepts any, herald needs some.
const (
	simTwilioSID    = "ACsimulator"
	simTwilioToken  = "sim-auth-token"
	simTwilioFrom   = "+15005550006"
	simVonageKey    = "simvonagekey"
	simVonageSecret = "sim-vonage-secret"
	simVonageFrom   = "Herald"
	// simVonageSignatureSecret signs the simulated Vonage delivery receipts.
	simVonageSignatureSecret = "sim-vonage-signature-secret"
	simSendGridKey           = "SG.sim-sendgrid-key"
	simSMTPFrom              = "Herald <herald@herald.localhost>"
	simAPNsKeyID             = "SIMKEY0001"
	simAPNsTeamID            = "SIMTEAM001"
	simAPNsTopic             = "dev.herald.sim"
	simEnvFile               = "herald.env"
)

// simEnvSecrets are the variables of the env file that stdout shows masked.
var simEnvSecrets = map[string]bool{
	"HERALD_TWILIO_AUTH_TOKEN": true, "HERALD_SMTP_PASSWORD": true,
	"HERALD_VONAGE_API_SECRET": true, "HERALD_SENDGRID_API_KEY": true, "HERALD_VONAGE_SIGNATURE_SECRET": true,
}

type simConfig struct {
	cfg       sim.Config
	dir       string
	faults    string
	latency   string
	logLevel  string
	logFormat string
	// publicURL is herald's --public-url: SendGrid's events go to it (Twilio and Vonage post
	// to the URL each message names). receipts says whether receipts are sent at all.
	publicURL string
	receipts  bool
	rc        sim.Receipts
}

func (c *simConfig) register(f *envFlags) {
	d := sim.DefaultConfig()
	f.String(&c.cfg.Addr, "sim-http-addr", d.Addr, "plain-HTTP address: FCM, its token endpoint, Twilio, Vonage, SendGrid, webhooks, /records, /stats, /faults")
	f.String(&c.cfg.TLSAddr, "sim-tls-addr", d.TLSAddr, "HTTPS (HTTP/2) address: APNs, and STARTTLS for the SMTP sink; empty disables it")
	f.String(&c.cfg.SMTPAddr, "sim-smtp-addr", d.SMTPAddr, "SMTP sink address; empty disables it")
	f.String(&c.dir, "sim-dir", filepath.Join(os.TempDir(), "herald-sim"), "directory receiving sim.pem, the throwaway FCM and APNs keys and "+simEnvFile)
	f.String(&c.faults, "sim-faults", "", "fault injection, e.g. fcm.unavailable=0.05,twilio.ratelimit=0.1,twilio.retryafter=2s (provider or all; ratelimit, unavailable, timeout, permanent, retryafter)")
	f.String(&c.latency, "sim-latency", "", "response latency, e.g. all.median=20ms,all.p99=200ms,apns.min=5ms (provider or all; min, median, p99)")
	f.secret(&c.cfg.WebhookSecret, "sim-webhook-secret", "whsec_ secret the webhook receiver checks the Standard Webhooks signature with, e.g. the one herald apikey create printed (default: none, no check)")
	f.Int(&c.cfg.MaxRecords, "sim-max-records", sim.DefaultMaxRecords, "records kept; the oldest tenth is dropped when full")
	f.String(&c.publicURL, "public-url", "", "herald's public URL (the same as herald serve's), where the simulated SendGrid posts its Event Webhook; herald sim writes it to "+simEnvFile)
	f.Bool(&c.receipts, "sim-receipts", true, "send delivery receipts (Twilio status callbacks, Vonage DLRs, SendGrid events), signed, to herald")
	f.Float(&c.rc.Delivered, "sim-receipts-delivered", 0.95, "share of accepted messages whose receipt says delivered; the others undelivered")
	f.Duration(&c.rc.Delay.Median, "sim-receipts-delay", 300*time.Millisecond, "median delay from acceptance to the first receipt (log-normal, p99 ten times the median)")
	f.Float(&c.rc.Duplicate, "sim-receipts-duplicate", 0.05, "share of receipts sent twice (receipts are at least once)")
	f.Float(&c.rc.Reorder, "sim-receipts-reorder", 0.1, "share of messages whose final receipt goes before the step on the way")
	f.String(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.String(&c.logFormat, "log-format", "console", "log format: json or console")
}

// runSim is `herald sim`: the provider simulator, with the settings that point `herald
// serve` at it written to <sim-dir>/herald.env (`set -a; . herald.env; set +a`).
func runSim(ctx context.Context, args []string) error {
	var c simConfig
	f := newFlags("sim")
	c.register(f)
	if err := f.Parse(args); err != nil {
		return err
	}
	if err := sim.ParseSpec(c.faults+","+c.latency, &c.cfg); err != nil {
		return err
	}
	log, err := newLogger(c.logLevel, c.logFormat)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush of stderr

	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if c.cfg.TLSAddr != "" {
		c.cfg.CertFile = filepath.Join(c.dir, "sim.pem")
	}
	sgPublic, err := c.receiptsConfig()
	if err != nil {
		return err
	}
	s, err := sim.New(c.cfg, log)
	if err != nil {
		return err
	}
	if err := s.WriteDevCredentials(c.dir); err != nil {
		return err
	}
	env := simServeEnv(s, c)
	if c.cfg.Receipts != nil {
		env["HERALD_VONAGE_SIGNATURE_SECRET"] = simVonageSignatureSecret
		env["HERALD_SENDGRID_WEBHOOK_PUBLIC_KEY"] = sgPublic
		if c.publicURL != "" {
			env["HERALD_PUBLIC_URL"] = c.publicURL
		}
	}
	path := filepath.Join(c.dir, simEnvFile)
	if err := writeEnvFile(path, env); err != nil {
		return err
	}
	defer os.Remove(path)
	printSimEnv(path, env)
	log.Info("serve env written", zap.String("file", path))
	return s.Run(ctx)
}

// simServeEnv returns the HERALD_* variables that point every sender of `herald serve` at s.
func simServeEnv(s *sim.Sim, c simConfig) map[string]string {
	base := "http://" + s.Addr()
	env := map[string]string{
		"HERALD_SENDERS":                sendersProviders,
		"HERALD_SIM_URL":                base,
		"HERALD_SIM_WEBHOOK_URL":        base + "/webhook/",
		"HERALD_WEBHOOK_ENABLED":        "true",
		"HERALD_WEBHOOK_ALLOW_HTTP":     "true",
		"HERALD_WEBHOOK_ALLOW_LOOPBACK": "true",
		"HERALD_TWILIO_BASE_URL":        base,
		"HERALD_TWILIO_ACCOUNT_SID":     simTwilioSID,
		"HERALD_TWILIO_AUTH_TOKEN":      simTwilioToken,
		"HERALD_TWILIO_FROM":            simTwilioFrom,
		// Vonage and SendGrid are configured too: standbys of SMS and EMAIL (weight 0).
		"HERALD_VONAGE_BASE_URL":      base,
		"HERALD_VONAGE_API_KEY":       simVonageKey,
		"HERALD_VONAGE_API_SECRET":    simVonageSecret,
		"HERALD_VONAGE_FROM":          simVonageFrom,
		"HERALD_SENDGRID_BASE_URL":    base,
		"HERALD_SENDGRID_API_KEY":     simSendGridKey,
		"HERALD_SENDGRID_FROM":        simSMTPFrom,
		"HERALD_FCM_CREDENTIALS_FILE": filepath.Join(c.dir, sim.FCMCredentialsFile),
		"HERALD_FCM_BASE_URL":         base,
	}
	if s.SMTPAddr() != "" {
		env["HERALD_SMTP_ADDR"] = s.SMTPAddr()
		env["HERALD_SMTP_FROM"] = simSMTPFrom
		env["HERALD_SMTP_USERNAME"] = "herald"
		env["HERALD_SMTP_PASSWORD"] = "sim"
		env["HERALD_SMTP_TLS_POLICY"] = "mandatory" // STARTTLS with sim.pem
		if s.TLSAddr() == "" {
			env["HERALD_SMTP_TLS_POLICY"] = "none"
		}
	}
	if s.TLSAddr() != "" {
		env["HERALD_SENDER_CA_FILE"] = c.cfg.CertFile
		env["HERALD_APNS_KEY_FILE"] = filepath.Join(c.dir, sim.APNsKeyFile)
		env["HERALD_APNS_KEY_ID"] = simAPNsKeyID
		env["HERALD_APNS_TEAM_ID"] = simAPNsTeamID
		env["HERALD_APNS_TOPIC"] = simAPNsTopic
		env["HERALD_APNS_BASE_URL"] = "https://" + s.TLSAddr()
	}
	return env
}

func sortedEnv(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// writeEnvFile writes `export K='v'` lines, atomically (a reader never sees half a file).
func writeEnvFile(path string, env map[string]string) error {
	var b strings.Builder
	b.WriteString("# herald serve → herald sim; written by herald sim, removed when it stops.\n")
	for _, k := range sortedEnv(env) {
		fmt.Fprintf(&b, "export %s='%s'\n", k, strings.ReplaceAll(env[k], "'", `'\''`))
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("sim: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("sim: write %s: %w", path, err)
	}
	return nil
}

func printSimEnv(path string, env map[string]string) {
	fmt.Printf("# point herald serve at the simulator:  . %s && herald serve\n", path)
	for _, k := range sortedEnv(env) {
		v := env[k]
		if simEnvSecrets[k] {
			v = "(in " + path + ")"
		}
		fmt.Printf("#   %s=%s\n", k, v)
	}
}

// receiptsConfig sets the simulator's receipts (with --sim-receipts): Twilio's signed with
// the development auth token, Vonage's with simVonageSignatureSecret, SendGrid's with a key
// made at start to <public-url>/providers/sendgrid/events. It returns that key's public half
// (base64 DER) for herald's --sendgrid-webhook-public-key.
func (c *simConfig) receiptsConfig() (string, error) {
	if !c.receipts {
		return "", nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("sim: receipt signing key: %w", err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", fmt.Errorf("sim: receipt signing key: %w", err)
	}
	rc := c.rc
	rc.Delay.P99 = 10 * rc.Delay.Median
	rc.TwilioAuthToken, rc.VonageSignatureSecret, rc.SendGridKey = simTwilioToken, simVonageSignatureSecret, key
	if c.publicURL != "" {
		rc.SendGridEventsURL = strings.TrimRight(c.publicURL, "/") + receipts.SendGridPath
	}
	c.cfg.Receipts = &rc
	return base64.StdEncoding.EncodeToString(der), nil
}
