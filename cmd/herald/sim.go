package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.uber.org/zap"

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
	simSendGridKey  = "SG.sim-sendgrid-key"
	simSMTPFrom     = "Herald <herald@herald.localhost>"
	simAPNsKeyID    = "SIMKEY0001"
	simAPNsTeamID   = "SIMTEAM001"
	simAPNsTopic    = "dev.herald.sim"
	simEnvFile      = "herald.env"
)

// simEnvSecrets are the variables of the env file that stdout shows masked.
var simEnvSecrets = map[string]bool{
	"HERALD_TWILIO_AUTH_TOKEN": true, "HERALD_SMTP_PASSWORD": true,
	"HERALD_VONAGE_API_SECRET": true, "HERALD_SENDGRID_API_KEY": true,
}

type simConfig struct {
	cfg       sim.Config
	dir       string
	faults    string
	latency   string
	logLevel  string
	logFormat string
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
	f.Int(&c.cfg.MaxRecords, "sim-max-records", 1_000_000, "records kept; the oldest tenth is dropped when full")
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
	s, err := sim.New(c.cfg, log)
	if err != nil {
		return err
	}
	if err := s.WriteDevCredentials(c.dir); err != nil {
		return err
	}
	env := simServeEnv(s, c)
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
