// Package ingest is herald's HTTP API: clients authenticate with an API key and POST
// notifications, which are stored with their delivery rows in one PostgreSQL transaction.
// It also serves the user contact and preference profiles, the template registry and the
// health probes. See docs/api.md.
package ingest

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/heraldhq/herald"
)

// Config configures the API. The zero value is valid: every zero field takes its default.
type Config struct {
	// MaxBodyBytes is the largest request body accepted, in bytes; a larger body is answered
	// with 413. Default 64 KiB.
	MaxBodyBytes int64
	// MaxPayloadBytes is the largest notification payload accepted, in bytes of compact JSON;
	// a larger payload is a validation error (400). Default 16 KiB.
	MaxPayloadBytes int
	// ReadyTimeout bounds the checks of /readyz (database ping and migration state).
	// Default 2 s.
	ReadyTimeout time.Duration
	// AuthCacheTTL is how long a process remembers a valid API key before looking it up
	// again, and so how long a revoked key may still work. Negative disables the cache.
	// Default 5 s.
	AuthCacheTTL time.Duration
	// AdmissionSlots is how many POST /api/notifications requests may do database work at
	// once (admission.go); the others wait for a slot. Default: the MaxConns of the pool
	// given to New, so that admitted requests do not queue for a connection.
	AdmissionSlots int
	// AdmissionHighReserve is how many of the AdmissionSlots only HIGH requests may take.
	// Default max(1, AdmissionSlots/4), less than AdmissionSlots.
	AdmissionHighReserve int
	// AdmissionWait is how long a NORMAL or LOW request waits for a slot before it is
	// answered 503 overloaded. A HIGH request waits as long as its client. Default 500 ms.
	AdmissionWait time.Duration
	// Channels are the channels the installation delivers (those with a configured
	// provider). A notification's other channels are suppressed channel_unavailable; one
	// whose channels are all others is refused, 422 channel_unavailable. Give every process
	// the same. Default: every channel.
	Channels []herald.Channel
	// RedriveMax is the most deliveries one re-drive (POST /api/redrives) may match; a
	// filter matching more is answered 422 redrive_too_large with the count. Default
	// 1,000,000 (internal/redrive's DefaultMax).
	RedriveMax int
	// Priorities are the priorities this API accepts; a notification or campaign of another
	// is refused, 422 priority_not_accepted, and nothing is written. An API that accepts HIGH
	// only is an OTP pool's (docs/operations.md, "An OTP pool"): the services that send OTPs
	// call it, and the CPU reserved for it serves no burst of NORMAL or LOW POSTs. Default:
	// every priority.
	Priorities []herald.Priority
	// Receipts are the handlers of the providers' receipt endpoints (package receipts), by
	// "METHOD /path" (receipts.Route.Key); an endpoint without one answers 404.
	Receipts map[string]http.Handler
}

// Defaults.
const (
	DefaultMaxBodyBytes    = 64 << 10
	DefaultMaxPayloadBytes = 16 << 10
	DefaultReadyTimeout    = 2 * time.Second
	DefaultAuthCacheTTL    = 5 * time.Second
	DefaultAdmissionWait   = 500 * time.Millisecond
)

// authCacheEntries bounds the API key cache.
const authCacheEntries = 10000

// withDefaults returns c with every zero field set to its default; poolConns is the MaxConns
// of the API's pool.
func (c Config) withDefaults(poolConns int) Config {
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.MaxPayloadBytes = cmp.Or(c.MaxPayloadBytes, DefaultMaxPayloadBytes)
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, DefaultReadyTimeout)
	c.AuthCacheTTL = cmp.Or(c.AuthCacheTTL, DefaultAuthCacheTTL)
	c.AdmissionSlots = cmp.Or(c.AdmissionSlots, poolConns)
	c.AdmissionHighReserve = cmp.Or(c.AdmissionHighReserve, min(max(1, c.AdmissionSlots/4), c.AdmissionSlots-1))
	c.AdmissionWait = cmp.Or(c.AdmissionWait, DefaultAdmissionWait)
	if len(c.Priorities) == 0 {
		c.Priorities = herald.Priorities
	}
	return c
}

// HighOnly says whether an API of c accepts HIGH and nothing else: an OTP pool's, whose
// process runs no campaign expander and no re-drive executor, work that would take the CPU
// reserved for HIGH.
func (c Config) HighOnly() bool {
	return len(c.Priorities) == 1 && c.Priorities[0] == herald.PriorityHigh
}

func (c *Config) validate() error {
	var errs []error
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("MaxBodyBytes %d: must be at least 1024", c.MaxBodyBytes))
	}
	if c.MaxPayloadBytes < 2 {
		errs = append(errs, fmt.Errorf("MaxPayloadBytes %d: must be at least 2", c.MaxPayloadBytes))
	}
	if int64(c.MaxPayloadBytes) > c.MaxBodyBytes {
		errs = append(errs, fmt.Errorf("MaxPayloadBytes %d: must not exceed MaxBodyBytes %d", c.MaxPayloadBytes, c.MaxBodyBytes))
	}
	if c.ReadyTimeout < 0 {
		errs = append(errs, fmt.Errorf("ReadyTimeout %s: must not be negative", c.ReadyTimeout))
	}
	if c.AdmissionSlots < 1 {
		errs = append(errs, fmt.Errorf("AdmissionSlots %d: must be at least 1", c.AdmissionSlots))
	}
	if c.AdmissionHighReserve < 0 || c.AdmissionHighReserve >= c.AdmissionSlots {
		errs = append(errs, fmt.Errorf("AdmissionHighReserve %d: must be at least 0 and less than AdmissionSlots %d",
			c.AdmissionHighReserve, c.AdmissionSlots))
	}
	if c.AdmissionWait < 0 {
		errs = append(errs, fmt.Errorf("AdmissionWait %s: must not be negative", c.AdmissionWait))
	}
	for i, p := range c.Priorities {
		if _, err := herald.ParsePriority(string(p)); err != nil || slices.Contains(c.Priorities[:i], p) {
			errs = append(errs, fmt.Errorf("priority %q of Priorities %v: not HIGH, NORMAL or LOW, or named twice", p, c.Priorities))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("ingest config: %w", errors.Join(errs...))
	}
	return nil
}
