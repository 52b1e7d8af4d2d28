// Package campaign expands campaigns: the expander worker turns an EXPANDING campaign into
// notifications and deliveries, one lot of users per transaction, paced to leave CPU and WAL
// bandwidth to HIGH notifications, and ends ACTIVE campaigns DONE once their deliveries are
// all final. Every user of a lot goes through the rules of a single POST
// (internal/recipient.Decide). The HTTP API over campaigns is ingest's.
package campaign

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/adapt"
	"github.com/heraldhq/herald/internal/pace"
	"github.com/heraldhq/herald/internal/recipient"
	"github.com/heraldhq/herald/internal/sleep"
)

// ExpanderConfig configures the campaign expander. The zero value is valid.
type ExpanderConfig struct {
	// LotSize is the number of users expanded per transaction. Default 1,000.
	LotSize int
	// PollInterval is how often an idle expander looks for a campaign to expand, and how long
	// it waits after a failed lot. Default 500 ms.
	PollInterval time.Duration
	// Rate paces the expansion: at most this many deliveries per second written by this
	// process, over every campaign it expands (a lot of n deliveries is followed by a pause
	// that brings the average down to Rate). It leaves CPU and WAL bandwidth to HIGH
	// notifications while a campaign expands; see docs/architecture.md "Campaign expansion".
	// Default DefaultRate; negative: unpaced.
	Rate int
	// DoneInterval is how often the expander looks for ACTIVE campaigns whose deliveries are
	// all final, to end them DONE (markDoneCampaigns); every campaign is looked at no more
	// often than this by all expanders together. Default 10 s.
	DoneInterval time.Duration
	// Channels are the channels the installation delivers (those with a provider), as for a
	// single POST: a user's other channels are suppressed (and counted) channel_unavailable.
	// Default: every channel.
	Channels []herald.Channel
	// Adapt, when set, makes Rate the ceiling of an adaptive rate that gives way to HIGH
	// (its latency and the relay's lag; docs/dispatch.md "Adaptive limits"). Nil, or an
	// unpaced Rate: the rate is fixed.
	Adapt *adapt.Controller
}

// Defaults of ExpanderConfig.
const (
	DefaultLotSize      = 1000
	DefaultPollInterval = 500 * time.Millisecond
	DefaultRate         = 5000
	DefaultDoneInterval = 10 * time.Second
)

// withDefaults returns c with every zero field set to its default.
func (c ExpanderConfig) withDefaults() ExpanderConfig {
	c.LotSize = cmp.Or(c.LotSize, DefaultLotSize)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.Rate = cmp.Or(c.Rate, DefaultRate)
	c.DoneInterval = cmp.Or(c.DoneInterval, DefaultDoneInterval)
	return c
}

func (c *ExpanderConfig) validate() error {
	if c.LotSize < 1 || c.LotSize > 10_000 {
		return fmt.Errorf("expander config: LotSize %d: must be 1-10000", c.LotSize)
	}
	if c.PollInterval < 0 {
		return fmt.Errorf("expander config: PollInterval %s: must not be negative", c.PollInterval)
	}
	if c.DoneInterval < 0 {
		return fmt.Errorf("expander config: DoneInterval %s: must not be negative", c.DoneInterval)
	}
	return nil
}

// Expander turns EXPANDING campaigns into notifications and deliveries, one lot of users per
// transaction (ExpandLot). Every ingest process runs one; they coordinate through the
// campaign row alone: a lot holds the row's lock (FOR NO KEY UPDATE SKIP LOCKED), so one lot of a
// campaign is written at a time and another process expands another campaign meanwhile. The
// cursor expanded_through moves in the lot's transaction, so a crash loses at most the lot
// in progress, which the next expander writes again. Between lots it also ends ACTIVE
// campaigns DONE when their deliveries are all final (markDone), so that reading a campaign
// never writes.
type Expander struct {
	cfg       ExpanderConfig
	available recipient.ChannelSet
	pool      *pgxpool.Pool
	log       *zap.Logger
	rate      *adapt.Limiter // Rate, adapted; nil when unpaced
	nextDone  time.Time      // when markDone is due next; owned by Run
}

// NewExpander returns an expander over pool, a migrated herald database.
func NewExpander(cfg ExpanderConfig, pool *pgxpool.Pool, log *zap.Logger) (*Expander, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, errors.New("expander: nil pool")
	}
	if log == nil {
		log = zap.NewNop()
	}
	x := &Expander{cfg: cfg, available: recipient.NewChannelSet(cfg.Channels), pool: pool,
		log: log.With(zap.String("component", "expander"))}
	if cfg.Rate > 0 {
		x.rate = cfg.Adapt.Limiter("expander", cfg.Rate)
	}
	return x, nil
}

// pace is the rate the next lot is paced at: the adaptive rate, or Rate when unpaced.
func (x *Expander) pace() int {
	if x.rate == nil {
		return x.cfg.Rate
	}
	return x.rate.Limit()
}

// Run expands campaigns until ctx ends: lot after lot while there is work, each lot starting
// no sooner than the adaptive rate (at most Rate) allows, polling every PollInterval when there is none, and ending
// finished campaigns DONE every DoneInterval. A failed lot is logged and tried again after a
// pause.
func (x *Expander) Run(ctx context.Context) error {
	var pace pace.Pacer // spaces the lots to the rate, as the re-drive executor's
	var wait time.Duration
	for sleep.For(ctx, wait) == nil {
		started := time.Now()
		if x.doneDue(started) {
			if err := x.markDone(ctx); err != nil && ctx.Err() == nil {
				x.log.Error("campaign done check failed", zap.Error(err))
			}
		}
		worked, written, err := x.ExpandLot(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			x.log.Error("campaign lot failed", zap.Error(err))
			wait = x.cfg.PollInterval
		case worked:
			wait = pace.Wait(started, time.Now(), written, x.pace())
		default:
			wait = x.cfg.PollInterval
		}
	}
	return nil
}
