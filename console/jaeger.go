package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// jaegerTimeout bounds the console's call to Jaeger's query API: a slow Jaeger costs the
// operator a message, not a hung page.
const jaegerTimeout = 3 * time.Second

// maxTraceBytes bounds the trace the console reads from Jaeger.
const maxTraceBytes = 16 << 20

// errTraceNotFound: Jaeger holds no trace with the id (not yet, or no longer).
var errTraceNotFound = errors.New("trace not found")

// jaegerTrace is the answer of Jaeger's GET /api/traces/{id}, with the fields the trace
// view reads.
type jaegerTrace struct {
	Data []struct {
		Spans     []jaegerSpan `json:"spans"`
		Processes map[string]struct {
			ServiceName string `json:"serviceName"`
		} `json:"processes"`
	} `json:"data"`
}

type jaegerSpan struct {
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []jaegerRef `json:"references"`
	StartTime     int64       `json:"startTime"` // µs since the epoch
	Duration      int64       `json:"duration"`  // µs
	Tags          []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	ProcessID string `json:"processID"`
}

type jaegerRef struct {
	RefType string `json:"refType"`
	SpanID  string `json:"spanID"`
}

// newJaegerClient is the console's HTTP client for Jaeger's query API. Without keep-alive:
// the trace view is opened now and then, and no idle connection outlives its request.
func newJaegerClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	return &http.Client{Transport: tr, Timeout: jaegerTimeout}
}

// fetchTrace reads trace id (validated by the caller) from the Jaeger query API at base.
// A 404, or an answer without spans, is errTraceNotFound.
func fetchTrace(ctx context.Context, hc *http.Client, base, id string) (*jaegerTrace, error) {
	ctx, cancel := context.WithTimeout(ctx, jaegerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/api/traces/"+id, nil)
	if err != nil {
		return nil, fmt.Errorf("jaeger trace request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("jaeger trace request: %w", err)
	}
	defer res.Body.Close()
	switch {
	case res.StatusCode == http.StatusNotFound:
		return nil, errTraceNotFound
	case res.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("jaeger trace request: status %d", res.StatusCode)
	}
	dec := json.NewDecoder(io.LimitReader(res.Body, maxTraceBytes))
	dec.UseNumber()
	var tr jaegerTrace
	if err := dec.Decode(&tr); err != nil {
		return nil, fmt.Errorf("decode jaeger trace: %w", err)
	}
	for _, d := range tr.Data {
		if len(d.Spans) > 0 {
			return &tr, nil
		}
	}
	return nil, errTraceNotFound
}
