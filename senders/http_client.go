package senders

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
)

// HTTPConfig tunes the one HTTP client each HTTP provider sender keeps for its lifetime, so
// that connections (and TLS sessions) are reused across sends.
type HTTPConfig struct {
	// MaxConnsPerHost bounds the connections to one provider host. Default 64.
	MaxConnsPerHost int
	// IdleConnTimeout closes a pooled connection idle this long. Default 90s.
	IdleConnTimeout time.Duration
	// DialTimeout bounds the TCP connect. Default 5s.
	DialTimeout time.Duration
	// TLSConfig overrides the TLS settings (a test CA, a client certificate). Default: the
	// system roots, TLS 1.2 or later.
	TLSConfig *tls.Config
	// CAFile, when set, names a PEM file of extra trusted roots (a private CA, the
	// simulator's certificate), added to the system roots or to TLSConfig's.
	CAFile string
	// DialControl, when set, vets every address before the socket connects (see webhook's
	// public-address guard). A client with a DialControl never uses a proxy: through a proxy
	// the address dialled, and so vetted, would be the proxy's rather than the target's.
	DialControl func(network, address string, c syscall.RawConn) error
	// Resolver resolves host names for dials. Default: the system resolver.
	Resolver *net.Resolver
}

// withDefaults returns c with every zero field set to its default.
func (c HTTPConfig) withDefaults() HTTPConfig {
	c.MaxConnsPerHost = cmp.Or(c.MaxConnsPerHost, 64)
	c.IdleConnTimeout = cmp.Or(c.IdleConnTimeout, 90*time.Second)
	c.DialTimeout = cmp.Or(c.DialTimeout, 5*time.Second)
	return c
}

// NewHTTPClient returns a client with a pooled, HTTP/2-capable transport wrapped in otelhttp,
// so every provider call is a client span named after provider ("push:fcm POST") carrying the
// response code and propagating the trace. Redirects are not followed: a provider that
// redirects a POST is misconfigured, and following would turn it into a GET. The HTTP(S)_PROXY
// environment is honoured unless cfg.DialControl is set.
func NewHTTPClient(provider string, cfg HTTPConfig) (*http.Client, error) {
	cfg = cfg.withDefaults()
	dialer := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second, Control: cfg.DialControl, Resolver: cfg.Resolver}
	proxy := http.ProxyFromEnvironment
	if cfg.DialControl != nil {
		proxy = nil // HTTPS_PROXY would turn the guard's check into a check of the proxy
	}
	tlsConfig, err := TLSWithCAFile(cfg.TLSConfig, cfg.CAFile)
	if err != nil {
		return nil, err
	}
	base := &http.Transport{
		Proxy:                 proxy,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsConfig,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          cfg.MaxConnsPerHost * 4,
		MaxIdleConnsPerHost:   cfg.MaxConnsPerHost,
		MaxConnsPerHost:       cfg.MaxConnsPerHost,
		IdleConnTimeout:       cfg.IdleConnTimeout,
		TLSHandshakeTimeout:   cfg.DialTimeout,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: closer{otelhttp.NewTransport(base,
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
				return provider + " " + r.Method
			})), base},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// closer lets http.Client.CloseIdleConnections reach the transport beneath otelhttp's.
type closer struct {
	http.RoundTripper
	base *http.Transport
}

func (c closer) CloseIdleConnections() { c.base.CloseIdleConnections() }

// TLSWithCAFile returns a copy of base (default: TLS 1.2 or later, system roots) that also
// trusts the PEM certificates in caFile. An empty caFile returns the copy unchanged.
func TLSWithCAFile(base *tls.Config, caFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if base != nil {
		c = base.Clone()
	}
	if caFile == "" {
		return c, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	pool := c.RootCAs
	if pool == nil {
		if pool, err = x509.SystemCertPool(); err != nil {
			pool = x509.NewCertPool()
		}
	}
	pool = pool.Clone()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
	}
	c.RootCAs = pool
	return c, nil
}

// DoHTTP sends req and classifies a failure to obtain a response. If the request was not yet
// fully written (connect refused, DNS, TLS handshake, timeout while connecting) the provider
// cannot have acted on it: Transient. Once it was written, a timeout or reset may hide an
// accepted message: Ambiguous. The error text names neither the URL nor the host, since a
// webhook URL is recipient data.
func DoHTTP(client *http.Client, req *http.Request) (*http.Response, error) {
	var written atomic.Bool
	trace := &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				written.Store(true)
			}
		},
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := client.Do(req)
	if err == nil {
		return resp, nil
	}
	code := "connection"
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		code = "timeout"
	case errors.Is(err, context.Canceled):
		code = "canceled"
	}
	cause := err
	var ue *url.Error
	if errors.As(err, &ue) {
		cause = ue.Err
	}
	safe := &redactedError{msg: redact(cause, req), err: cause}
	if written.Load() {
		return nil, AmbiguousError(code, fmt.Errorf("no response after request was sent: %w", safe))
	}
	return nil, TransientError(code, 0, fmt.Errorf("request not sent: %w", safe))
}

// SetIdempotencyKey sets the Idempotency-Key header without making net/http treat the POST
// as replayable: given a canonical "Idempotency-Key" entry, http.Transport silently resends
// a request whose reused connection broke before the response, which is a duplicate if the
// provider had already acted on it. Under a lower-case map key the header goes out the same
// (header names are case-insensitive; HTTP/2 lower-cases them anyway) but only the safe
// retry remains: the one for a request nothing of which was written.
func SetIdempotencyKey(h http.Header, key string) {
	h.Del("Idempotency-Key")
	h["idempotency-key"] = []string{key}
}

// redactedError keeps the cause for errors.Is/As while its text holds no URL.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact returns err's text with the request's URL and host removed.
func redact(err error, req *http.Request) string {
	s := err.Error()
	for _, secret := range []string{req.URL.String(), req.URL.Host, req.URL.Hostname()} {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "<host>")
		}
	}
	return s
}

// HTTPStatusError classifies a non-2xx HTTP status by the generic rule: 408 and 429
// Transient, other 4xx Permanent, 5xx Transient, anything else (an unfollowed redirect, an
// informational status) Permanent. code is the provider's own code, or the status when empty.
// It returns nil for a 2xx status.
func HTTPStatusError(status int, code string, retryAfter time.Duration, err error) *Error {
	if status >= 200 && status < 300 {
		return nil
	}
	if code == "" {
		code = fmt.Sprint(status)
	}
	if err == nil {
		err = fmt.Errorf("http status %d", status)
	}
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500:
		return TransientError(code, retryAfter, err)
	default:
		return PermanentError(code, err)
	}
}

// ParseRetryAfter reads a Retry-After header value: delay-seconds or an HTTP-date. It returns
// zero when the header is absent, malformed or in the past.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var secs int64
	if _, err := fmt.Sscan(v, &secs); err == nil && fmt.Sprint(secs) == v {
		if secs <= 0 {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// ReadBody reads at most 64 KiB of a response body and drains and closes the rest, so the
// connection goes back to the pool.
func ReadBody(resp *http.Response) []byte {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	return b
}

// HTTPAccount is what every HTTP sender shares: its pooled client (from NewHTTPClient) and
// the provider-account name it is rate-limited under. Senders embed it for Provider and Close.
type HTTPAccount struct {
	Client  *http.Client
	Account string
}

// Provider returns the provider-account name, e.g. "sms:twilio".
func (a HTTPAccount) Provider() string { return a.Account }

// Close closes idle provider connections. Sends after Close still work.
func (a HTTPAccount) Close() error {
	a.Client.CloseIdleConnections()
	return nil
}
