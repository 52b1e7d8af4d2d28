package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/heraldhq/herald/internal/timeline"
)

// traceConfig is the configuration of herald trace.
type traceConfig struct {
	commonConfig
	Client    string
	JSON      bool
	JaegerURL string
}

func (c *traceConfig) register(f *envFlags) {
	c.commonConfig.register(f)
	f.String(&c.Client, "client", "", "API client id or name: the argument is an Idempotency-Key of that client")
	f.Bool(&c.JSON, "json", false, "print the timeline as JSON")
	f.String(&c.JaegerURL, "jaeger-url", "", "Jaeger UI base URL (http://127.0.0.1:16686): print the link to the notification's trace")
}

// runTrace prints the timeline of one notification from the database alone:
//
//	herald trace NOTIFICATION-ID | DELIVERY-ID
//	herald trace --client CLIENT IDEMPOTENCY-KEY
func runTrace(ctx context.Context, args []string) error {
	var c traceConfig
	f := newFlags("trace")
	c.register(f)
	pos, err := parseInterleaved(f, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: herald trace [--json] [--jaeger-url URL] NOTIFICATION-ID | DELIVERY-ID | --client CLIENT IDEMPOTENCY-KEY")
	}
	c.MaxConns = 2
	pool, err := openPool(ctx, c.commonConfig, "herald-trace")
	if err != nil {
		return err
	}
	defer pool.Close()
	id, err := timeline.Resolve(ctx, pool, pos[0], c.Client)
	if err != nil {
		return fmt.Errorf("trace %s: %w", pos[0], err)
	}
	tl, err := timeline.Load(ctx, pool, id, "")
	if err != nil {
		return fmt.Errorf("trace %s: %w", pos[0], err)
	}
	return writeTrace(os.Stdout, tl, c.JSON, c.JaegerURL)
}

// traceJSON is herald trace --json: the timeline and, when --jaeger-url is set, the link.
type traceJSON struct {
	*timeline.Timeline
	JaegerURL string `json:"jaegerUrl,omitempty"`
}

func writeTrace(w io.Writer, tl *timeline.Timeline, asJSON bool, jaegerURL string) error {
	if !asJSON {
		return timeline.WriteText(w, tl, jaegerURL)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(traceJSON{Timeline: tl, JaegerURL: timeline.JaegerURL(jaegerURL, tl.TraceID)})
}
