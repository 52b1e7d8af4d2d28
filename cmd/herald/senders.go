package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/receipts"
	"github.com/heraldhq/herald/senders/apns"
	"github.com/heraldhq/herald/senders/fcm"
	"github.com/heraldhq/herald/senders/push"
	"github.com/heraldhq/herald/senders/sendgrid"
	"github.com/heraldhq/herald/senders/smtp"
	"github.com/heraldhq/herald/senders/twilio"
	"github.com/heraldhq/herald/senders/vonage"
	"github.com/heraldhq/herald/senders/webhook"
)

// Sender modes of --senders.
const (
	sendersLog       = "log"
	sendersProviders = "providers"
)

// senderFlags maps flags onto the provider senders. With --senders providers, a channel gets
// its senders when a provider of it is configured (--webhook-enabled, a Twilio account SID or
// a Vonage API key, an SMTP address or a SendGrid API key, an FCM or APNs key file); SMS and
// EMAIL may have two, weighted by --sms-providers and --email-providers (providers.go). A
// channel without a provider is unavailable (--channels, channels.go). Webhooks are signed
// with the secret of the API client that created the notification, read from the database:
// there is no installation-wide webhook secret.
type senderFlags struct {
	Mode   string
	CAFile string
	// PublicURL is the address providers reach herald at for their receipts.
	PublicURL string
	// Channels is --channels as given; channels() resolves it.
	Channels []string
	// SMSProviders and EmailProviders are --sms-providers and --email-providers as given.
	SMSProviders, EmailProviders string

	WebhookEnabled bool
	Webhook        webhook.Config
	Twilio         twilio.Config
	Vonage         vonage.Config
	// VonageSignatureSecret checks the signature of Vonage's delivery receipts.
	VonageSignatureSecret string
	SMTPAddr              string
	SMTP                  smtp.Config
	SendGrid              sendgrid.Config
	// SendGridWebhookPublicKey verifies SendGrid's signed Event Webhook (base64 DER or PEM,
	// ECDSA P-256).
	SendGridWebhookPublicKey string
	FCMFile                  string
	FCM                      fcm.Config
	APNsFile                 string
	APNs                     apns.Config
	PushConns                int
}

func (s *senderFlags) register(f *envFlags) {
	f.String(&s.Mode, "senders", sendersLog, "senders: log (log each delivery, call no provider) or providers (the providers configured by the flags below)")
	f.String(&s.CAFile, "sender-ca-file", "", "PEM file of extra trusted roots for every provider connection (a private CA, the simulator's sim.pem)")
	f.String(&s.PublicURL, "public-url", "", "the address providers reach herald's API listener at, e.g. https://herald.example.com: receipt URLs are built from it (Twilio's StatusCallback, Vonage's callback) and Twilio's signatures checked against it; empty: no per-message receipt URL is sent")
	f.Strings(&s.Channels, "channels", nil, "channels this installation delivers (PUSH, EMAIL, SMS, WEBHOOK); a notification for another is suppressed channel_unavailable. Give every process the same. Default: with --senders providers the channels whose providers are configured, with --senders log every channel")
	f.String(&s.SMSProviders, "sms-providers", "", "SMS providers and weights, e.g. twilio=100,vonage=0 (twilio, vonage; 0: standby; a name alone weighs 100). Two or more listed: SMS is routed by health between them (docs/dispatch.md). Default: the configured ones, the first (twilio, then vonage) at 100, and the first alone serves SMS")
	f.String(&s.EmailProviders, "email-providers", "", "EMAIL providers and weights, e.g. smtp=100,sendgrid=0 (smtp, sendgrid; as --sms-providers). Default: the configured ones, the first (smtp, then sendgrid) at 100, and the first alone serves EMAIL")

	f.Bool(&s.WebhookEnabled, "webhook-enabled", false, "enable WEBHOOK (each webhook is signed with its API client's secret, see herald apikey)")
	f.Bool(&s.Webhook.AllowHTTP, "webhook-allow-http", false, "allow plain http:// webhook URLs (development only)")
	f.Bool(&s.Webhook.AllowLoopback, "webhook-allow-loopback", false, "allow webhook URLs resolving to 127.0.0.0/8 or ::1 (tests and local development only; every other non-public address stays blocked)")

	f.String(&s.Twilio.AccountSID, "twilio-account-sid", "", "Twilio account SID (AC...); enables SMS")
	f.String(&s.Twilio.Username, "twilio-api-key", "", "Twilio API key SID to authenticate with (default: the account SID)")
	f.secret(&s.Twilio.Password, "twilio-auth-token", "Twilio auth token, or the API key's secret")
	f.String(&s.Twilio.From, "twilio-from", "", "sender number (E.164) or alphanumeric sender id")
	f.String(&s.Twilio.MessagingServiceSID, "twilio-messaging-service-sid", "", "Twilio messaging service (MG...), instead of --twilio-from")
	f.String(&s.Twilio.BaseURL, "twilio-base-url", twilio.DefaultBaseURL, "Twilio API root")

	f.String(&s.Vonage.APIKey, "vonage-api-key", "", "Vonage API key; enables SMS through the Vonage SMS API")
	f.secret(&s.Vonage.APISecret, "vonage-api-secret", "Vonage API secret")
	f.secret(&s.VonageSignatureSecret, "vonage-signature-secret", "Vonage signature secret, which signs its delivery receipts")
	f.String(&s.Vonage.From, "vonage-from", "", "Vonage sender: a number (E.164) or an alphanumeric id of at most 11 characters")
	f.String(&s.Vonage.BaseURL, "vonage-base-url", vonage.DefaultBaseURL, "Vonage SMS API root")

	f.String(&s.SMTPAddr, "smtp-addr", "", "SMTP submission server host:port (STARTTLS; port 465 is not supported); enables EMAIL")
	f.String(&s.SMTP.Username, "smtp-username", "", "SMTP AUTH user (none: no AUTH)")
	f.secret(&s.SMTP.Password, "smtp-password", "SMTP AUTH password")
	f.String(&s.SMTP.From, "smtp-from", "", `envelope and header sender, e.g. "Herald <no-reply@example.com>"`)
	f.String(&s.SMTP.TLSPolicy, "smtp-tls-policy", smtp.TLSMandatory, "STARTTLS: mandatory, opportunistic or none (local sinks only)")
	f.String(&s.SMTP.MessageIDDomain, "smtp-message-id-domain", "herald", "right-hand side of Message-ID <delivery-id@domain>")
	f.Int(&s.SMTP.MaxConns, "smtp-max-conns", smtp.DefaultMaxConns, "open connections to the SMTP server, at most")

	f.secret(&s.SendGrid.APIKey, "sendgrid-api-key", "SendGrid API key with the mail.send permission; enables EMAIL through SendGrid")
	f.String(&s.SendGrid.From, "sendgrid-from", "", `SendGrid sender, a verified sender identity, e.g. "Herald <no-reply@example.com>"`)
	f.String(&s.SendGrid.BaseURL, "sendgrid-base-url", sendgrid.DefaultBaseURL, "SendGrid API root (https://api.eu.sendgrid.com for the EU region)")
	f.String(&s.SendGridWebhookPublicKey, "sendgrid-webhook-public-key", "", "SendGrid Event Webhook verification key (base64 DER or PEM, ECDSA P-256), which checks the signature of its events")

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

// build returns the routes of every channel with a configured provider (in log mode, one
// log sender per channel) and a function that closes their senders. secrets is where the
// webhook sender looks up each API client's signing secrets. A provider configured but left
// out of --sms-providers / --email-providers is not built.
func (s *senderFlags) build(log *zap.Logger, secrets webhook.Secrets) (map[herald.Channel][]route, func(), error) {
	if err := s.validate(false); err != nil {
		return nil, nil, err
	}
	routes := map[herald.Channel][]route{}
	if s.Mode == sendersLog {
		log.Warn("senders: log mode, no provider is called (--senders providers to send)")
		for ch, snd := range dispatch.NewLogSenders(log) {
			routes[ch] = []route{{Name: sendersLog, Account: snd.Provider(), Weight: maxWeight, Sender: snd}}
		}
		return routes, func() {}, nil
	}
	var closers []func() error
	closeAll := func() {
		for _, c := range closers {
			_ = c()
		}
	}
	fail := func(err error) (map[herald.Channel][]route, func(), error) {
		closeAll()
		return nil, nil, err
	}
	add := func(ch herald.Channel, name string, weight int, snd dispatch.Sender, closer func() error) {
		routes[ch] = append(routes[ch], route{Name: name, Account: snd.Provider(), Weight: weight, Sender: snd})
		if closer != nil {
			closers = append(closers, closer)
		}
	}

	if s.WebhookEnabled {
		cfg := s.Webhook
		cfg.HTTP.CAFile = s.CAFile
		w, err := webhook.New(cfg, secrets, log)
		if err != nil {
			return fail(err)
		}
		add(herald.ChannelWebhook, "webhook", maxWeight, w, w.Close)
	}
	weights, err := s.providerWeights()
	if err != nil {
		return fail(err)
	}
	for _, ch := range []herald.Channel{herald.ChannelEmail, herald.ChannelSMS} {
		for _, w := range weights[ch] {
			snd, closer, err := s.newProvider(w.name, log)
			if err != nil {
				return fail(err)
			}
			add(ch, w.name, w.weight, snd, closer)
		}
	}
	platforms := map[string]push.PlatformSender{}
	if s.FCMFile != "" {
		cfg := s.FCM
		cfg.HTTP.CAFile = s.CAFile
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
		add(herald.ChannelPush, "push", maxWeight, p, nil)
	}
	if len(routes) == 0 {
		return fail(errors.New("--senders providers: no provider is configured (see herald serve -h: webhook-*, twilio-*, vonage-*, smtp-*, sendgrid-*, fcm-*, apns-*)"))
	}
	s.logRoutes(log, routes)
	return routes, closeAll, nil
}

// newProvider builds the SMS or EMAIL sender named name (a name of multiProvider).
func (s *senderFlags) newProvider(name string, log *zap.Logger) (dispatch.Sender, func() error, error) {
	switch name {
	case "twilio":
		tw, err := twilio.New(s.twilioConfig(), log)
		if err != nil {
			return nil, nil, err
		}
		return tw, tw.Close, nil
	case "vonage":
		v, err := vonage.New(s.vonageConfig(), log)
		if err != nil {
			return nil, nil, err
		}
		return v, v.Close, nil
	case "smtp":
		cfg := s.SMTP
		host, port, err := net.SplitHostPort(s.SMTPAddr)
		if err != nil {
			return nil, nil, fmt.Errorf("--smtp-addr %q: want host:port: %w", s.SMTPAddr, err)
		}
		if cfg.Port, err = strconv.Atoi(port); err != nil {
			return nil, nil, fmt.Errorf("--smtp-addr %q: bad port", s.SMTPAddr)
		}
		cfg.Host, cfg.CAFile = host, s.CAFile
		m, err := smtp.New(cfg, log)
		if err != nil {
			return nil, nil, err
		}
		return m, m.Close, nil
	case "sendgrid":
		cfg := s.SendGrid
		cfg.HTTP.CAFile = s.CAFile
		sg, err := sendgrid.New(cfg, log)
		if err != nil {
			return nil, nil, err
		}
		return sg, sg.Close, nil
	}
	return nil, nil, fmt.Errorf("unknown provider %q", name)
}

// twilioConfig is the Twilio sender's configuration: the flags, the sender CA file and, with
// --public-url, the status callback URL of every message.
func (s *senderFlags) twilioConfig() twilio.Config {
	cfg := s.Twilio
	cfg.HTTP.CAFile = s.CAFile
	if s.PublicURL != "" {
		cfg.StatusCallbackURL = strings.TrimRight(s.PublicURL, "/") + receipts.TwilioPath
	}
	return cfg
}

// vonageConfig is the Vonage sender's configuration: the flags, the sender CA file and, with
// --public-url, the receipt URL as every message's callback.
func (s *senderFlags) vonageConfig() vonage.Config {
	cfg := s.Vonage
	cfg.HTTP.CAFile = s.CAFile
	if s.PublicURL != "" {
		cfg.CallbackURL = strings.TrimRight(s.PublicURL, "/") + receipts.VonagePath
	}
	return cfg
}

// logRoutes says which providers serve each channel, with their weights and the one that
// serves it today; it names no credential.
func (s *senderFlags) logRoutes(log *zap.Logger, routes map[herald.Channel][]route) {
	missing := map[herald.Channel]string{
		herald.ChannelPush:    "--fcm-credentials-file or --apns-key-file",
		herald.ChannelEmail:   "--smtp-addr or --sendgrid-api-key",
		herald.ChannelSMS:     "--twilio-account-sid or --vonage-api-key",
		herald.ChannelWebhook: "--webhook-enabled",
	}
	serving := primaries(routes)
	for _, ch := range herald.Channels {
		rs, ok := routes[ch]
		if !ok {
			log.Warn("no provider: notifications for this channel are suppressed channel_unavailable unless --channels lists it",
				zap.String("channel", string(ch)), zap.String("configure", missing[ch]))
			continue
		}
		weights := make([]string, len(rs))
		for i, r := range rs {
			weights[i] = r.Account + "=" + strconv.Itoa(r.Weight)
		}
		log.Info("sender", zap.String("channel", string(ch)), zap.String("provider", serving[ch].Provider()),
			zap.Strings("providers", weights))
	}
}
