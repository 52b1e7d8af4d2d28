package senders

import (
	"bufio"
	"context"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"7":                             7 * time.Second,
		" 120 ":                         2 * time.Minute,
		"0":                             0,
		"-3":                            0,
		"1.5":                           0,
		"soon":                          0,
		"Thu, 01 Jan 2026 00:00:30 GMT": 30 * time.Second,
		"Wed, 31 Dec 2025 23:59:00 GMT": 0,
	} {
		require.Equal(t, want, ParseRetryAfter(in, now), in)
	}
}

func TestHTTPStatusError(t *testing.T) {
	require.Nil(t, HTTPStatusError(204, "", 0, nil))
	for status, want := range map[int]Class{400: Permanent, 404: Permanent, 408: Transient, 429: Transient,
		500: Transient, 503: Transient, 301: Permanent} {
		require.Equal(t, want, HTTPStatusError(status, "", 0, nil).Class, "%d", status)
	}
	e := HTTPStatusError(429, "", 3*time.Second, nil)
	require.Equal(t, "429", e.Code)
	require.Equal(t, 3*time.Second, e.RetryAfter)
}

func TestDoHTTPConnectionRefusedIsTransient(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/secret-path", strings.NewReader("{}"))
	_, err = DoHTTP(newClient(t), req)
	class, se := Classify(err)
	require.Equal(t, Transient, class, "%v", err)
	require.Equal(t, "connection", se.Code)
	require.NotContains(t, err.Error(), addr)
	require.NotContains(t, err.Error(), "secret-path")
}

// A server that reads a request on a reused connection and closes it without answering may
// have acted on it: the client must report Ambiguous and must not resend on its own.
func TestNoSilentReplayAfterRequestWasRead(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			w.WriteHeader(http.StatusOK) // first request: answer, keep the connection
			return
		}
		_, _ = io.ReadAll(r.Body)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close() // later requests: read, then hang up
		}
	}))
	defer srv.Close()
	client := newClient(t)
	send := func() error {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader(`{"a":1}`))
		SetIdempotencyKey(req.Header, "delivery-1")
		resp, err := DoHTTP(client, req)
		if err == nil {
			ReadBody(resp)
		}
		return err
	}
	require.NoError(t, send())
	err := send()
	class, _ := Classify(err)
	require.Equal(t, Ambiguous, class, "%v", err)
	require.Equal(t, int32(2), requests.Load(), "the transport did not resend the POST")
}

func TestSetIdempotencyKeyOnTheWire(t *testing.T) {
	got := make(chan string, 1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r, err := http.ReadRequest(bufio.NewReader(c))
		if err == nil {
			got <- r.Header.Get("Idempotency-Key")
		}
		_, _ = c.Write([]byte("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"))
	}()
	req, _ := http.NewRequest(http.MethodPost, "http://"+l.Addr().String(), strings.NewReader("{}"))
	SetIdempotencyKey(req.Header, "d-42")
	resp, err := DoHTTP(newClient(t), req)
	require.NoError(t, err)
	ReadBody(resp)
	require.Equal(t, "d-42", <-got)
}

func newClient(t *testing.T) *http.Client {
	c, err := NewHTTPClient("test", HTTPConfig{})
	require.NoError(t, err)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func TestCAFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	dir := t.TempDir()
	ca := dir + "/ca.pem"
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	get := func(cfg HTTPConfig) error {
		c, err := NewHTTPClient("test", cfg)
		require.NoError(t, err)
		defer c.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
		resp, err := DoHTTP(c, req)
		if err == nil {
			ReadBody(resp)
		}
		return err
	}
	require.Error(t, get(HTTPConfig{}), "untrusted without the CA file")
	require.NoError(t, get(HTTPConfig{CAFile: ca}))
	_, err := NewHTTPClient("test", HTTPConfig{CAFile: dir + "/missing.pem"})
	require.Error(t, err)
}

func TestCloseIdleConnectionsReachesThePool(t *testing.T) {
	var closed atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c, err := NewHTTPClient("test", HTTPConfig{})
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
	resp, err := DoHTTP(c, req)
	require.NoError(t, err)
	ReadBody(resp)
	require.Zero(t, closed.Load(), "the connection is pooled")
	c.CloseIdleConnections()
	require.Eventually(t, func() bool { return closed.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
}

// A client whose dials are vetted never takes a proxy from the environment: the vetted
// address would be the proxy's. Other provider clients still honour HTTPS_PROXY.
func TestGuardedClientUsesNoProxy(t *testing.T) {
	guard := func(string, string, syscall.RawConn) error { return nil }
	for _, tc := range []struct {
		cfg       HTTPConfig
		wantProxy bool
	}{{HTTPConfig{}, true}, {HTTPConfig{DialControl: guard}, false}} {
		c, err := NewHTTPClient("test", tc.cfg)
		require.NoError(t, err)
		base := c.Transport.(closer).base
		require.Equal(t, tc.wantProxy, base.Proxy != nil)
	}
}
