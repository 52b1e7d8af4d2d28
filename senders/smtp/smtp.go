// Package smtp delivers EMAIL messages over SMTP (STARTTLS, SMTP AUTH) with
// github.com/wneessen/go-mail, keeping a small pool of open connections. The Message-ID is
// derived from the delivery id, so a resent message is recognisably the same message.
package smtp

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wneessen/go-mail"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/senders"
)

// TLS policies.
const (
	TLSMandatory     = "mandatory"     // STARTTLS required (default)
	TLSOpportunistic = "opportunistic" // STARTTLS when offered
	TLSNone          = "none"          // plain text: local sinks only
)

var tracer = otel.Tracer("github.com/heraldhq/herald/senders/smtp")

// Config configures the SMTP sender.
type Config struct {
	// Host is the SMTP server. Required.
	Host string
	// Port is the server port (submission with STARTTLS). Default 587.
	Port int
	// TLSPolicy is one of TLSMandatory (default), TLSOpportunistic, TLSNone.
	TLSPolicy string
	// TLSConfig overrides the TLS settings. Default: system roots, ServerName Host.
	TLSConfig *tls.Config
	// CAFile, when set, names a PEM file of extra trusted roots (a private CA, the
	// simulator's certificate).
	CAFile string
	// Username and Password enable SMTP AUTH (the strongest mechanism the server offers).
	// Default: no AUTH.
	Username string
	Password string
	// From is the envelope and header sender, e.g. "Herald <no-reply@example.com>". Required.
	From string
	// MessageIDDomain is the right-hand side of the Message-ID, <delivery-id@domain>.
	// Default "herald".
	MessageIDDomain string
	// Timeout bounds one send: connect, each SMTP command and the final reply. Default 30s.
	Timeout time.Duration
	// MaxConns bounds the open connections to the server. Default 4.
	MaxConns int
	// IdleTimeout closes a pooled connection idle this long. Default 30s.
	IdleTimeout time.Duration
	// Provider is the provider-account name used for rate limiting. Default "email:smtp".
	Provider string
}

// DefaultMaxConns is Config.MaxConns's default.
const DefaultMaxConns = 4

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.TLSPolicy = cmp.Or(c.TLSPolicy, TLSMandatory)
	c.Port = cmp.Or(c.Port, 587)
	c.MessageIDDomain = cmp.Or(c.MessageIDDomain, "herald")
	c.Timeout = cmp.Or(c.Timeout, 30*time.Second)
	c.MaxConns = cmp.Or(c.MaxConns, DefaultMaxConns)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, 30*time.Second)
	c.Provider = cmp.Or(c.Provider, "email:smtp")
	return c
}

func (c *Config) validate() error {
	switch {
	case c.Host == "":
		return errors.New("smtp: Host is required")
	case c.From == "":
		return errors.New("smtp: From is required")
	case c.Timeout < 0 || c.MaxConns < 0 || c.IdleTimeout < 0:
		return errors.New("smtp: Timeout, MaxConns and IdleTimeout must not be negative")
	}
	switch c.TLSPolicy {
	case TLSMandatory, TLSOpportunistic, TLSNone:
	default:
		return fmt.Errorf("smtp: unknown TLSPolicy %q", c.TLSPolicy)
	}
	if err := mail.NewMsg().From(c.From); err != nil {
		return errors.New("smtp: From is not a valid address")
	}
	return nil
}

// Sender sends e-mail over SMTP. It is safe for concurrent use; Close releases its pooled
// connections.
type Sender struct {
	cfg    Config
	client *mail.Client
	log    *zap.Logger
	pool   *pool
}

// New returns an SMTP sender. It does not connect until the first Send.
func New(cfg Config, log *zap.Logger) (*Sender, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts := []mail.Option{
		mail.WithPort(cfg.Port),
		mail.WithTimeout(cfg.Timeout),
		mail.WithDialContextFunc(dialRecorded),
	}
	tlsConfig, err := senders.TLSWithCAFile(cfg.TLSConfig, cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("smtp: %w", err)
	}
	if tlsConfig.ServerName == "" {
		tlsConfig.ServerName = cfg.Host
	}
	switch cfg.TLSPolicy {
	case TLSMandatory:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory), mail.WithTLSConfig(tlsConfig))
	case TLSOpportunistic:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSOpportunistic), mail.WithTLSConfig(tlsConfig))
	case TLSNone:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	}
	if cfg.Username != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover),
			mail.WithUsername(cfg.Username), mail.WithPassword(cfg.Password))
	}
	client, err := mail.NewClient(cfg.Host, opts...)
	if err != nil {
		return nil, fmt.Errorf("smtp: new client: %w", err)
	}
	return &Sender{
		cfg:    cfg,
		client: client,
		log:    log.With(zap.String("component", "senders.smtp")),
		pool:   newPool(cfg.MaxConns, cfg.IdleTimeout),
	}, nil
}

// Provider returns the provider-account name, "email:smtp" by default.
func (s *Sender) Provider() string { return s.cfg.Provider }

// Close closes the pooled connections. Sends after Close still work, without pooling.
func (s *Sender) Close() error {
	s.pool.close(s.client)
	return nil
}

// MessageID returns the Message-ID (without angle brackets) of a delivery's e-mail.
func (s *Sender) MessageID(deliveryID string) string {
	return deliveryID + "@" + s.cfg.MessageIDDomain
}

// Send sends m as an e-mail with a text and, when the template has one, an HTML part.
func (s *Sender) Send(ctx context.Context, m *senders.Message) (senders.Result, error) {
	res := senders.Result{Provider: s.cfg.Provider}
	msg, err := s.build(m)
	if err != nil {
		return res, fmt.Errorf("smtp delivery %s: %w", m.DeliveryID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	ctx, span := tracer.Start(ctx, s.cfg.Provider+" send", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("herald.delivery_id", m.DeliveryID)))
	defer span.End()
	reply, err := s.deliver(ctx, msg)
	if err != nil {
		class, se := senders.Classify(err)
		if se != nil {
			res.Code = se.Code
		}
		span.SetAttributes(attribute.String("smtp.reply_code", res.Code), attribute.Stringer("herald.error_class", class))
		span.SetStatus(codes.Error, class.String())
		senders.LogFailure(s.log, m, err)
		return res, fmt.Errorf("smtp delivery %s: %w", m.DeliveryID, err)
	}
	res.Code = "250"
	span.SetAttributes(attribute.String("smtp.reply_code", res.Code))
	res.ProviderMessageID = strings.Trim(reply, "<>")
	return res, nil
}

func (s *Sender) build(m *senders.Message) (*mail.Msg, error) {
	if m.To.Email == "" {
		return nil, senders.PermanentError("no_address", errors.New("recipient has no e-mail address"))
	}
	if m.Content.Text == "" && m.Content.HTML == "" {
		return nil, senders.PermanentError("no_content", errors.New("no text or html part"))
	}
	msg := mail.NewMsg(mail.WithNoDefaultUserAgent())
	if err := msg.From(s.cfg.From); err != nil {
		return nil, senders.PermanentError("invalid_from", errors.New("invalid from address"))
	}
	if err := msg.To(m.To.Email); err != nil {
		return nil, senders.PermanentError("invalid_address", errors.New("invalid recipient address"))
	}
	msg.Subject(m.Content.Subject)
	msg.SetMessageIDWithValue(s.MessageID(m.DeliveryID))
	msg.SetDate()
	switch {
	case m.Content.Text != "" && m.Content.HTML != "":
		msg.SetBodyString(mail.TypeTextPlain, m.Content.Text)
		msg.AddAlternativeString(mail.TypeTextHTML, m.Content.HTML)
	case m.Content.Text != "":
		msg.SetBodyString(mail.TypeTextPlain, m.Content.Text)
	default:
		msg.SetBodyString(mail.TypeTextHTML, m.Content.HTML)
	}
	return msg, nil
}

// replyCode returns the three-digit SMTP code of a go-mail error as a string, "" if none.
func replyCode(code int) string {
	if code == 0 {
		return ""
	}
	return strconv.Itoa(code)
}
