package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
)

// lagRefresh is how often the lag page reloads itself, in seconds.
const lagRefresh = 5

// laneLag is one dispatch lane: its consumer group's lag in records (what the relay
// published that no worker has taken yet) and the database's view of the same lane.
type laneLag struct {
	Priority, Topic, Group string
	Lag                    int64
	Members                int
	State                  string
	Error                  string // Kafka did not answer for this group
	DuePending             int64  // PENDING rows due now, waiting for the relay
	OldestDue              string // age of the oldest of them
	Queued                 int64  // QUEUED rows: published, not yet claimed
}

// slotLag is the relay's replication slot: WAL written that the relay has not confirmed.
type slotLag struct {
	Name    string
	Found   bool
	Active  bool
	Bytes   int64
	Pending string // pg_size_pretty of Bytes
}

// providerRate is one provider's calls in the last minute against its configured limit.
type providerRate struct {
	Provider   string
	LastMinute int64
	PerSecond  float64 // average over the minute
	BusiestSec int64   // most calls that finished in one second of the minute
	Limit      int     // 0: none configured
}

type lagData struct {
	At        time.Time
	Refresh   int
	Lanes     []laneLag
	Slot      slotLag
	Providers []providerRate
	KafkaNote string
}

// selectLaneRows counts, per priority, the rows waiting on the relay (due PENDING, read
// through the partial index on PENDING) and on the workers (QUEUED, through the in-flight
// index). Both partial indexes stay small whatever the history.
const selectLaneRows = `
SELECT priority,
       count(*) FILTER (WHERE status = 'PENDING'),
       coalesce(extract(epoch FROM now() - min(next_attempt_at) FILTER (WHERE status = 'PENDING')), 0),
       count(*) FILTER (WHERE status = 'QUEUED')
  FROM delivery
 WHERE (status = 'PENDING' AND next_attempt_at <= now()) OR status = 'QUEUED'
 GROUP BY priority`

// selectSlotLag reads the relay's slot of this database (slot names are unique in the
// cluster, but another herald database on the same cluster may hold one of the same name).
const selectSlotLag = `
SELECT active, coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint,
       pg_size_pretty(coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0))
  FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database()`

// selectProviderRates reads the attempts that finished in the last minute, through the BRIN
// index on delivery_attempt.finished_at: per provider, how many, and the busiest second.
const selectProviderRates = `
SELECT provider, sum(calls)::bigint, max(calls)::bigint
  FROM (SELECT provider, date_trunc('second', finished_at), count(*) AS calls
          FROM delivery_attempt
         WHERE finished_at > now() - interval '1 minute' AND provider IS NOT NULL
         GROUP BY 1, 2) AS per_second
 GROUP BY provider ORDER BY provider`

func (c *Console) lag(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d := lagData{At: time.Now().UTC(), Refresh: lagRefresh}
	d.Lanes = make([]laneLag, len(herald.Priorities))
	byPriority := map[herald.Priority]*laneLag{}
	for i, p := range herald.Priorities {
		l := c.cfg.Lanes[p]
		d.Lanes[i] = laneLag{Priority: string(p), Topic: l.Topic, Group: l.Group}
		byPriority[p] = &d.Lanes[i]
	}
	if err := c.readLaneRows(ctx, byPriority); err != nil {
		c.fail(w, http.StatusInternalServerError, "the lanes could not be read", err)
		return
	}
	d.Slot.Name = c.cfg.Slot
	err := c.pool.QueryRow(ctx, selectSlotLag, c.cfg.Slot).Scan(&d.Slot.Active, &d.Slot.Bytes, &d.Slot.Pending)
	d.Slot.Found = err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		c.fail(w, http.StatusInternalServerError, "the replication slot could not be read", err)
		return
	}
	if d.Providers, err = c.readProviderRates(ctx); err != nil {
		c.fail(w, http.StatusInternalServerError, "the provider rates could not be read", err)
		return
	}
	c.readGroupLag(ctx, &d)
	c.render(w, http.StatusOK, "lag", page{Title: "Lag", LoggedIn: true, Nav: "lag", Data: d})
}

func (c *Console) readLaneRows(ctx context.Context, lanes map[herald.Priority]*laneLag) error {
	rows, err := c.pool.Query(ctx, selectLaneRows)
	if err != nil {
		return fmt.Errorf("read lane rows: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			p      string
			due, q int64
			oldest float64
		)
		if err := rows.Scan(&p, &due, &oldest, &q); err != nil {
			return fmt.Errorf("read lane rows: %w", err)
		}
		if l := lanes[herald.Priority(p)]; l != nil {
			l.DuePending, l.Queued = due, q
			if due > 0 {
				l.OldestDue = time.Duration(oldest * float64(time.Second)).Round(time.Millisecond).String()
			}
		}
	}
	return rows.Err()
}

func (c *Console) readProviderRates(ctx context.Context) ([]providerRate, error) {
	rows, err := c.pool.Query(ctx, selectProviderRates)
	if err != nil {
		return nil, fmt.Errorf("read provider rates: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (providerRate, error) {
		var p providerRate
		err := row.Scan(&p.Provider, &p.LastMinute, &p.BusiestSec)
		p.PerSecond = float64(p.LastMinute) / 60
		p.Limit = c.cfg.RateLimits[p.Provider]
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("read provider rates: %w", err)
	}
	for prov, limit := range c.cfg.RateLimits { // limited providers without a call yet
		if !slices.ContainsFunc(out, func(p providerRate) bool { return p.Provider == prov }) {
			out = append(out, providerRate{Provider: prov, Limit: limit})
		}
	}
	slices.SortFunc(out, func(a, b providerRate) int {
		if a.Provider < b.Provider {
			return -1
		}
		if a.Provider > b.Provider {
			return 1
		}
		return 0
	})
	return out, nil
}

// readGroupLag asks Kafka for the lanes' consumer lag, within 2 seconds: a slow or absent
// Kafka shows as a note on the page, not as a failed page.
func (c *Console) readGroupLag(ctx context.Context, d *lagData) {
	if c.adm == nil {
		d.KafkaNote = "not configured in this process"
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	groups := make([]string, len(d.Lanes))
	for i, l := range d.Lanes {
		groups[i] = l.Group
	}
	lags, err := c.adm.Lag(ctx, groups...)
	if err != nil {
		c.log.Warn("read consumer lag", zap.Error(err))
		d.KafkaNote = "Kafka did not answer"
		return
	}
	for i := range d.Lanes {
		l := &d.Lanes[i]
		g, ok := lags[l.Group]
		if !ok {
			l.Error = "no answer"
			continue
		}
		if err := g.Error(); err != nil {
			l.Error = "unavailable"
			continue
		}
		l.Lag, l.Members, l.State = g.Lag.TotalByTopic()[l.Topic].Lag, len(g.Members), g.State
	}
}
