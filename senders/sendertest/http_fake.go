package sendertest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// HTTPFake is a Fake for an HTTP provider, built on httptest.
type HTTPFake struct {
	Server *httptest.Server

	key     func(r *http.Request, body []byte) (string, bool)
	respond func(w http.ResponseWriter, r *http.Request, body []byte, o Outcome)
	other   http.Handler

	mu      sync.Mutex
	outcome Outcome
	keys    []string
}

// HTTPFakeConfig describes a provider's HTTP protocol to NewHTTPFake.
type HTTPFakeConfig struct {
	// Key returns the idempotency key of a message request; ok is false for requests that are
	// not message sends (a token endpoint), which go to Other.
	Key func(r *http.Request, body []byte) (key string, ok bool)
	// Respond writes the provider's answer to a message request for outcome o (never Hang).
	Respond func(w http.ResponseWriter, r *http.Request, body []byte, o Outcome)
	// Other serves the requests Key does not claim. Default: 404.
	Other http.Handler
	// TLS starts the server with TLS and HTTP/2 enabled.
	TLS bool
}

// NewHTTPFake starts an HTTPFake that accepts until told otherwise. It is closed when t ends.
func NewHTTPFake(t *testing.T, cfg HTTPFakeConfig) *HTTPFake {
	f := &HTTPFake{key: cfg.Key, respond: cfg.Respond, other: cfg.Other, outcome: Accept}
	if f.other == nil {
		f.other = http.NotFoundHandler()
	}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	if cfg.TLS {
		f.Server.EnableHTTP2 = true
		f.Server.StartTLS()
	} else {
		f.Server.Start()
	}
	t.Cleanup(f.Server.Close)
	return f
}

// Next implements Fake.
func (f *HTTPFake) Next(o Outcome) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outcome = o
}

// Keys implements Fake.
func (f *HTTPFake) Keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keys...)
}

func (f *HTTPFake) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	key, ok := f.key(r, body)
	if !ok {
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.other.ServeHTTP(w, r)
		return
	}
	f.mu.Lock()
	f.keys = append(f.keys, key)
	o := f.outcome
	f.mu.Unlock()
	if o == Hang {
		<-r.Context().Done()
		return
	}
	f.respond(w, r, body, o)
}
