package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldhq/herald/internal/pgpool"
)

// acceptPool is NORMAL and LOW POSTs' own connections (ingest.AcceptPool), one per slot of
// the admission, opened on demand. The API's pool keeps the other routes, the console and
// the re-drive executor.
func acceptPool(ctx context.Context, c serveConfig) (*pgxpool.Pool, error) {
	return openAcceptPool(ctx, c, int32(c.Ingest.Slots(c.MaxConns)), "herald-accept", false)
}

// highAcceptPool is HIGH POSTs' own connections (ingest.HighPool), one per slot of the
// admission's HIGH reserve, all opened before the API serves and kept open, so that a HIGH
// accept never queues behind NORMAL and LOW for a connection nor opens one; nil when the
// reserve is empty.
func highAcceptPool(ctx context.Context, c serveConfig) (*pgxpool.Pool, error) {
	n := int32(c.Ingest.HighReserve(c.MaxConns))
	if n < 1 {
		return nil, nil
	}
	return openAcceptPool(ctx, c, n, "herald-high", true)
}

// openAcceptPool opens a pool of n sessions named name for POSTs' accepts, which plan the
// accept's statements once (pgpool.GenericPlans, pgpool.ByKey). With warm every session is
// opened now and kept open (MinConns); without, they are opened on demand.
func openAcceptPool(ctx context.Context, c serveConfig, n int32, name string, warm bool) (*pgxpool.Pool, error) {
	pc := c.commonConfig
	pc.MaxConns = int(n)
	cfg, err := poolConfig(pc, name, pgpool.ByKey(), pgpool.GenericPlans())
	if err != nil {
		return nil, err
	}
	if warm {
		cfg.MinConns = n
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if warm {
		// MinConns opens them in the background; open them now.
		if err := pgpool.Warm(ctx, pool, int(n)); err != nil {
			pool.Close()
			return nil, fmt.Errorf("connect to database: %w", err)
		}
	}
	return pool, nil
}
