package redrive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/adapt"
	"github.com/heraldhq/herald/internal/pace"
)

// Config configures the Executor. The zero value is valid.
type Config struct {
	// LotSize is the number of matched deliveries read, and re-armed or skipped, per
	// transaction. Default DefaultLotSize: a lot is one burst of writes, of WAL the relay
	// decodes in commit order and of records LOW's lanes take in, so smaller lots, spaced by
	// the pace, keep each burst shorter; but each lot has a fixed cost, and much smaller lots
	// re-arm more slowly than the campaign expander writes (docs/redrive.md).
	LotSize int
	// PollInterval is how often an idle executor looks for a re-drive to execute, and how
	// long it waits after a failed lot. Default 500 ms.
	PollInterval time.Duration
	// Rate paces the re-drive like LOW work: at most this many deliveries per second re-armed
	// by this process, over every re-drive it executes (a lot is followed by a pause that
	// brings the average down to Rate), so that the re-armed backlog reaches the relay and
	// the lanes no faster than a campaign's expansion does. Default DefaultRate; negative:
	// unpaced.
	Rate int
	// Adapt, when set, makes Rate the ceiling of an adaptive rate that gives way to HIGH, as
	// the campaign expander's (docs/dispatch.md "Adaptive limits"). Nil, or an unpaced Rate:
	// the rate is fixed.
	Adapt *adapt.Controller
}

// Defaults of Config.
const (
	DefaultLotSize      = 500
	DefaultPollInterval = 500 * time.Millisecond
	DefaultRate         = 5000
	MaxLotSize          = 10_000 // the largest LotSize
)

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.LotSize = cmp.Or(c.LotSize, DefaultLotSize)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.Rate = cmp.Or(c.Rate, DefaultRate)
	return c
}

func (c *Config) validate() error {
	if c.LotSize < 1 || c.LotSize > MaxLotSize {
		return fmt.Errorf("re-drive config: LotSize %d: must be 1-%d", c.LotSize, MaxLotSize)
	}
	if c.PollInterval < 0 {
		return fmt.Errorf("re-drive config: PollInterval %s: must not be negative", c.PollInterval)
	}
	return nil
}

// Executor re-arms the deliveries of RUNNING re-drives, one lot per transaction (runLot).
// Every ingest process runs one; they coordinate through the redrive row alone, as campaign
// expanders do through the campaign row: a lot holds the row's lock (FOR NO KEY UPDATE SKIP
// LOCKED), so one lot of a re-drive runs at a time and another process takes another
// re-drive meanwhile. The cursor moves in the lot's transaction, so a crash loses at most
// the lot in progress, which the next executor runs again; no delivery is re-armed twice by
// one re-drive.
type Executor struct {
	cfg  Config
	pool *pgxpool.Pool
	log  *zap.Logger
	rate *adapt.Limiter // Rate, adapted; nil when unpaced
}

// New returns an executor over pool, a migrated herald database.
func New(cfg Config, pool *pgxpool.Pool, log *zap.Logger) (*Executor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, errors.New("re-drive executor: nil pool")
	}
	if log == nil {
		log = zap.NewNop()
	}
	x := &Executor{cfg: cfg, pool: pool, log: log.With(zap.String("component", "redrive"))}
	if cfg.Rate > 0 {
		x.rate = cfg.Adapt.Limiter("redrive", cfg.Rate)
	}
	return x, nil
}

// pace is the rate the next lot is paced at: the adaptive rate, or Rate when unpaced.
func (x *Executor) pace() int {
	if x.rate == nil {
		return x.cfg.Rate
	}
	return x.rate.Limit()
}

// Run executes re-drives until ctx ends: lot after lot while there is work, each lot starting
// no sooner than the adaptive rate (at most Rate) allows, polling every PollInterval when
// there is none. A failed lot is logged and tried again after a pause. The pause after a lot
// follows the adaptive rate while it lasts: when the limit steps, the pause is worked out
// again at the new rate (pace.Pacer.Rerate), so that the re-drive speeds up as soon as HIGH
// is well and slows down as soon as it is not, rather than a lot's length later.
func (x *Executor) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	var p pace.Pacer
	var changed <-chan struct{} // nil (never ready) when the rate is fixed
	paced := false              // the timer is a pause after a lot (not a poll, not a retry)
	if x.rate != nil {
		changed = x.rate.Changed()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			if paced {
				t.Reset(p.Rerate(time.Now(), x.pace()))
			}
			continue
		case <-t.C:
		}
		paced = false
		started := time.Now()
		worked, armed, err := x.runLot(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			x.log.Error("re-drive lot failed", zap.Error(err))
			t.Reset(x.cfg.PollInterval)
		case worked:
			t.Reset(p.Wait(started, time.Now(), armed, x.pace()))
			paced = true
		default:
			t.Reset(x.cfg.PollInterval)
		}
	}
}
