package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/senders/apns"
	"github.com/heraldhq/herald/senders/fcm"
	"github.com/heraldhq/herald/senders/push"
	"github.com/heraldhq/herald/senders/smtp"
	"github.com/heraldhq/herald/senders/twilio"
	"github.com/heraldhq/herald/senders/webhook"
)

// Sender modes of --senders.
const (
	sendersLog       = "log"
	sendersProviders = "providers"
)

// senderFlags maps flags onto the provider senders. With --senders providers, a channel gets
// its sender when its provider is configured (--webhook-enabled, Twilio account SID, SMTP
// address, FCM key file or APNs key file); a channel without one ends its deliveries FAILED
// (NO_SENDER), which is logged at start. Webhooks are signed with the secret of the API
// client that created the notification, read from the database: there is no installation-
// wide webhook secret.
type senderFlags struct {
	Mode   string
	CAFile string

	WebhookEnabled bool
	Webhook        webhook.Config
	Twilio         twilio.Config
	SMTPAddr       string
	SMTP           smtp.Config
	FCMFile        string
	FCM            fcm.Config
	APNsFile       string
	APNs           apns.Config
	PushConns      int
}

func (s *senderFlags) register(f *envFlags) {
	f.String(&s.Mode, "senders", sendersLog, "senders: log (log each delivery, call no provider) or providers (the providers configured by the flags below)")
	f.String(&s.CAFile, "sender-ca-file", "", "PEM file of extra trusted roots for every provider connection (a private CA, the simulator's sim.pem)")

	f.Bool(&s.WebhookEnabled, "webhook-enabled", false, "enable WEBHOOK (each webhook is signed with its API client's secret, see herald apikey)")
	f.Bool(&s.Webhook.AllowHTTP, "webhook-allow-http", false, "allow plain http:// webhook URLs (development only)")
	f.Bool(&s.Webhook.AllowLoopback, "webhook-allow-loopback", false, "allow webhook URLs resolving to 127.0.0.0/8 or ::1 (tests and local development only; every other non-public address stays blocked)")

	f.String(&s.Twilio.AccountSID, "twilio-account-sid", "", "Twilio account SID (AC...); enables SMS")
	f.String(&s.Twilio.Username, "twilio-api-key", "", "Twilio API key SID to authenticate with (default: the account SID)")
	f.secret(&s.Twilio.Password, "twilio-auth-token", "Twilio auth token, or the API key's secret")
	f.String(&s.Twilio.From, "twilio-from", "", "sender number (E.164) or alphanumeric sender id")
	f.String(&s.Twilio.MessagingServiceSID, "twilio-messaging-service-sid", "", "Twilio messaging service (MG...), instead of --twilio-from")
	f.String(&s.Twilio.BaseURL, "twilio-base-url", twilio.DefaultBaseURL, "Twilio API root")

	f.String(&s.SMTPAddr, "smtp-addr", "", "SMTP submission server host:port (STARTTLS; port 465 is not supported); enables EMAIL")
	f.String(&s.SMTP.Username, "smtp-username", "", "SMTP AUTH user (none: no AUTH)")
	f.secret(&s.SMTP.Password, "smtp-password", "SMTP AUTH password")
	f.String(&s.SMTP.From, "smtp-from", "", `envelope and header sender, e.g. "Herald <no-reply@example.com>"`)
	f.String(&s.SMTP.TLSPolicy, "smtp-tls-policy", smtp.TLSMandatory, "STARTTLS: mandatory, opportunistic or none (local sinks only)")
	f.String(&s.SMTP.MessageIDDomain, "smtp-message-id-domain", "herald", "right-hand side of Message-ID <delivery-id@domain>")
	f.Int(&s.SMTP.MaxConns, "smtp-max-conns", smtp.DefaultMaxConns, "open connections to the SMTP server, at most")

	f.String(&s.FCMFile, "fcm-credentials-file", "", "FCM service-account key file (JSON); enables FCM push")
	f.String(&s.FCM.ProjectID, "fcm-project-id", "", "Firebase project (default: project_id of the key file)")
	f.String(&s.FCM.BaseURL, "fcm-base-url", fcm.DefaultBaseURL, "FCM API root")
	f.String(&s.FCM.TokenURL, "fcm-token-url", "", "OAuth2 token endpoint (default: token_uri of the key file)")

	f.String(&s.APNsFile, "apns-key-file", "", "APNs auth key (.p8); enables APNs push")
	f.String(&s.APNs.KeyID, "apns-key-id", "", "id of the APNs auth key (10 characters)")
	f.String(&s.APNs.TeamID, "apns-team-id", "", "Apple developer team id (10 characters)")
	f.String(&s.APNs.Topic, "apns-topic", "", "the app's bundle id (apns-topic)")
	f.String(&s.APNs.BaseURL, "apns-base-url", apns.Production, "APNs API root ("+apns.Sandbox+" for development builds)")
	f.Int(&s.PushConns, "push-max-parallel", push.DefaultMaxParallel, "devices of one PUSH delivery sent to at once")
}

// build returns the sender of every configured channel and a function that closes them.
// secrets is where the webhook sender looks up each API client's signing secrets.
func (s *senderFlags) build(log *zap.Logger, secrets webhook.Secrets) (map[herald.Channel]dispatch.Sender, func(), error) {
	switch s.Mode {
	case sendersLog:
		log.Warn("senders: log mode, no provider is called (--senders providers to send)")
		return dispatch.NewLogSenders(log), func() {}, nil
	case sendersProviders:
	default:
		return nil, nil, fmt.Errorf("--senders: %q is neither %s nor %s", s.Mode, sendersLog, sendersProviders)
	}
	out := map[herald.Channel]dispatch.Sender{}
	var closers []func() error
	closeAll := func() {
		for _, c := range closers {
			_ = c()
		}
	}
	fail := func(err error) (map[herald.Channel]dispatch.Sender, func(), error) {
		closeAll()
		return nil, nil, err
	}

	if s.WebhookEnabled {
		cfg := s.Webhook
		cfg.HTTP.CAFile = s.CAFile
		w, err := webhook.New(cfg, secrets, log)
		if err != nil {
			return fail(err)
		}
		out[herald.ChannelWebhook], closers = w, append(closers, w.Close)
	}
	if s.Twilio.AccountSID != "" {
		cfg := s.Twilio
		cfg.HTTP.CAFile = s.CAFile
		tw, err := twilio.New(cfg, log)
		if err != nil {
			return fail(err)
		}
		out[herald.ChannelSMS], closers = tw, append(closers, tw.Close)
	}
	if s.SMTPAddr != "" {
		cfg := s.SMTP
		host, port, err := net.SplitHostPort(s.SMTPAddr)
		if err != nil {
			return fail(fmt.Errorf("--smtp-addr %q: want host:port: %w", s.SMTPAddr, err))
		}
		if cfg.Port, err = strconv.Atoi(port); err != nil {
			return fail(fmt.Errorf("--smtp-addr %q: bad port", s.SMTPAddr))
		}
		cfg.Host, cfg.CAFile = host, s.CAFile
		m, err := smtp.New(cfg, log)
		if err != nil {
			return fail(err)
		}
		out[herald.ChannelEmail], closers = m, append(closers, m.Close)
	}
	platforms := map[string]push.PlatformSender{}
	if s.FCMFile != "" {
		cfg := s.FCM
		cfg.HTTP.CAFile = s.CAFile
		var err error
		if cfg.CredentialsJSON, err = os.ReadFile(s.FCMFile); err != nil {
			return fail(fmt.Errorf("--fcm-credentials-file: %w", err))
		}
		p, err := fcm.New(cfg, log)
		if err != nil {
			return fail(err)
		}
		platforms["FCM"], closers = p, append(closers, p.Close)
	}
	if s.APNsFile != "" {
		cfg := s.APNs
		cfg.HTTP.CAFile = s.CAFile
		var err error
		if cfg.KeyPEM, err = os.ReadFile(s.APNsFile); err != nil {
			return fail(fmt.Errorf("--apns-key-file: %w", err))
		}
		p, err := apns.New(cfg, log)
		if err != nil {
			return fail(err)
		}
		platforms["APNS"], closers = p, append(closers, p.Close)
	}
	if len(platforms) > 0 {
		p, err := push.New(push.Config{MaxParallel: s.PushConns}, platforms, log)
		if err != nil {
			return fail(err)
		}
		out[herald.ChannelPush] = p
	}
	if len(out) == 0 {
		return fail(errors.New("--senders providers: no provider is configured (see herald serve -h: webhook-*, twilio-*, smtp-*, fcm-*, apns-*)"))
	}
	s.logChannels(log, out)
	return out, closeAll, nil
}

// logChannels says which provider serves each channel; it names no credential.
func (s *senderFlags) logChannels(log *zap.Logger, out map[herald.Channel]dispatch.Sender) {
	missing := map[herald.Channel]string{
		herald.ChannelPush:    "--fcm-credentials-file or --apns-key-file",
		herald.ChannelEmail:   "--smtp-addr",
		herald.ChannelSMS:     "--twilio-account-sid",
		herald.ChannelWebhook: "--webhook-enabled",
	}
	for _, ch := range herald.Channels {
		if snd, ok := out[ch]; ok {
			log.Info("sender", zap.String("channel", string(ch)), zap.String("provider", snd.Provider()))
		} else {
			log.Warn("no sender: deliveries of this channel end FAILED", zap.String("channel", string(ch)),
				zap.String("configure", missing[ch]))
		}
	}
}
