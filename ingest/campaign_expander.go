package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
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
	// notifications while a campaign expands; see docs/architecture.md "Campaigns". Default
	// DefaultRate; negative: unpaced.
	Rate int
	// Channels are the channels the installation delivers, as Config.Channels: a user's
	// other channels are suppressed (and counted) channel_unavailable. Default: every channel.
	Channels []herald.Channel
}

// Defaults of ExpanderConfig.
const (
	DefaultLotSize      = 1000
	DefaultPollInterval = 500 * time.Millisecond
	DefaultRate         = 5000
)

func (c *ExpanderConfig) setDefaults() {
	if c.LotSize == 0 {
		c.LotSize = DefaultLotSize
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
}

func (c *ExpanderConfig) validate() error {
	if c.LotSize < 1 || c.LotSize > 10_000 {
		return fmt.Errorf("expander config: LotSize %d: must be 1-10000", c.LotSize)
	}
	if c.PollInterval < 0 {
		return fmt.Errorf("expander config: PollInterval %s: must not be negative", c.PollInterval)
	}
	return nil
}

// Expander turns EXPANDING campaigns into notifications and deliveries, one lot of users per
// transaction (expandLot). Every ingest process runs one; they coordinate through the
// campaign row alone: a lot holds the row's lock (FOR NO KEY UPDATE SKIP LOCKED), so one lot of a
// campaign is written at a time and another process expands another campaign meanwhile. The
// cursor expanded_through moves in the lot's transaction, so a crash loses at most the lot
// in progress, which the next expander writes again.
type Expander struct {
	cfg       ExpanderConfig
	available channelSet
	pool      *pgxpool.Pool
	log       *zap.Logger
}

// NewExpander returns an expander over pool, a migrated herald database.
func NewExpander(cfg ExpanderConfig, pool *pgxpool.Pool, log *zap.Logger) (*Expander, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, errors.New("expander: nil pool")
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Expander{cfg: cfg, available: newChannelSet(cfg.Channels), pool: pool,
		log: log.With(zap.String("component", "expander"))}, nil
}

// Run expands campaigns until ctx ends: lot after lot while there is work, each lot starting
// no sooner than Rate allows, polling every PollInterval when there is none. A failed lot is
// logged and tried again after a pause.
func (x *Expander) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	var pace pacer
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		started := time.Now()
		worked, written, err := x.expandLot(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			x.log.Error("campaign lot failed", zap.Error(err))
			t.Reset(x.cfg.PollInterval)
		case worked:
			t.Reset(pace.wait(started, time.Now(), written, x.cfg.Rate))
		default:
			t.Reset(x.cfg.PollInterval)
		}
	}
}
