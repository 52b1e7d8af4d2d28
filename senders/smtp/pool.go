package smtp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"github.com/wneessen/go-mail"
	gmsmtp "github.com/wneessen/go-mail/smtp"

	"github.com/heraldhq/herald/senders"
)

// conn is one open, authenticated SMTP connection. raw is the TCP connection beneath it, so
// that a cancelled send can unblock a read by moving its deadline (the go-mail client holds
// its lock while it reads).
type conn struct {
	c         *gmsmtp.Client
	raw       net.Conn
	idleSince time.Time
}

func (c *conn) close() { _ = c.raw.Close() }

// pool bounds the open connections (slots) and keeps the idle ones, newest first.
type pool struct {
	slots       chan struct{}
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   []*conn
	closed bool
}

func newPool(maxConns int, idleTimeout time.Duration) *pool {
	return &pool{slots: make(chan struct{}, maxConns), idleTimeout: idleTimeout}
}

func (p *pool) acquire(ctx context.Context) error {
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pool) release() { <-p.slots }

// get returns an idle connection, or nil. Connections idle past idleTimeout are closed.
func (p *pool) get() *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if time.Since(c.idleSince) < p.idleTimeout {
			return c
		}
		c.close()
	}
	return nil
}

func (p *pool) put(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.close()
		return
	}
	c.idleSince = time.Now()
	p.idle = append(p.idle, c)
}

func (p *pool) close(client *mail.Client) {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		_ = c.raw.SetDeadline(time.Now().Add(time.Second))
		_ = client.CloseWithSMTPClient(c.c)
		c.close()
	}
}

type rawConnKey struct{}

// dialRecorded dials TCP and records the connection in the *net.Conn the context carries.
func dialRecorded(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err == nil {
		if slot, ok := ctx.Value(rawConnKey{}).(*net.Conn); ok {
			*slot = c
		}
	}
	return c, err
}

func (s *Sender) dial(ctx context.Context) (*conn, error) {
	var raw net.Conn
	c, err := s.client.DialToSMTPClientWithContext(context.WithValue(ctx, rawConnKey{}, &raw))
	if err != nil {
		if raw != nil {
			_ = raw.Close()
		}
		return nil, classifyDial(ctx, err)
	}
	return &conn{c: c, raw: raw}, nil
}

// deliver sends msg on a pooled connection, dialling when none is idle. A reused
// connection that fails its NOOP check is replaced once: nothing was sent on it.
func (s *Sender) deliver(ctx context.Context, msg *mail.Msg) (string, error) {
	if err := s.pool.acquire(ctx); err != nil {
		return "", senders.TransientError("canceled", 0, fmt.Errorf("wait for an smtp connection: %w", err))
	}
	defer s.pool.release()
	for {
		c := s.pool.get()
		reused := c != nil
		if !reused {
			var err error
			if c, err = s.dial(ctx); err != nil {
				return "", err
			}
		}
		stop := context.AfterFunc(ctx, func() { _ = c.raw.SetDeadline(time.Now()) })
		err := s.client.SendWithSMTPClient(c.c, msg)
		aborted := !stop()
		var se *mail.SendError
		isSendErr := errors.As(err, &se)
		switch {
		case err == nil || msg.IsDelivered():
			if err == nil && !aborted {
				s.pool.put(c)
			} else {
				c.close()
			}
			return msg.GetMessageID(), nil
		case reused && isSendErr && se.Reason == mail.ErrConnCheck:
			c.close()
			continue
		case isSendErr && se.ErrorCode() != 0 && !aborted:
			s.pool.put(c) // the server answered: the connection is in a known state
		default:
			c.close()
		}
		return "", classifySend(err, aborted)
	}
}

// classifyDial: nothing was sent before MAIL FROM, so every failure to connect, greet,
// STARTTLS or authenticate is Transient (a rejected login is the operator's to fix).
func classifyDial(ctx context.Context, err error) error {
	var tp *textproto.Error
	switch {
	case errors.As(err, &tp):
		return senders.TransientError(fmt.Sprint(tp.Code), 0, fmt.Errorf("smtp connect: server replied %d", tp.Code))
	case ctx.Err() != nil || isTimeout(err):
		return senders.TransientError("timeout", 0, errors.New("smtp connect: timeout"))
	case strings.Contains(err.Error(), "STARTTLS"):
		return senders.TransientError("starttls", 0, errors.New("smtp connect: server does not offer STARTTLS"))
	}
	return senders.TransientError("connection", 0, fmt.Errorf("smtp connect: %w", errors.New(redactAddr(err))))
}

// classifySend maps a go-mail send error: 4xx Transient, 5xx Permanent; a lost connection
// while waiting for the reply to the message data Ambiguous (the server may have queued it),
// earlier Transient (an unterminated message is discarded by the server).
func classifySend(err error, aborted bool) error {
	var se *mail.SendError
	if !errors.As(err, &se) {
		return senders.AmbiguousError("unknown", errors.New("smtp send failed for an unknown reason"))
	}
	code := se.ErrorCode()
	detail := strings.TrimSpace(fmt.Sprintf("%d %s", code, se.EnhancedStatusCode()))
	switch {
	case code >= 400 && code < 500:
		return senders.TransientError(replyCode(code), 0, fmt.Errorf("smtp %s: %s", se.Reason, detail))
	case code >= 500 && code < 600:
		return senders.PermanentError(replyCode(code), fmt.Errorf("smtp %s: %s", se.Reason, detail))
	}
	what := "connection"
	if aborted || isTimeout(err) {
		what = "timeout"
	}
	if se.Reason == mail.ErrSMTPDataClose {
		return senders.AmbiguousError(what, fmt.Errorf("smtp %s: %s waiting for the server's reply to the message", se.Reason, what))
	}
	return senders.TransientError(what, 0, fmt.Errorf("smtp %s: %s", se.Reason, what))
}

func isTimeout(err error) bool {
	var ne net.Error
	return (errors.As(err, &ne) && ne.Timeout()) || strings.Contains(err.Error(), "i/o timeout")
}

// redactAddr keeps only the last part of a network error ("connection refused").
func redactAddr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}
