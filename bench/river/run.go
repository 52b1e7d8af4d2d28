package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/heraldhq/herald/bench/result"
)

// config is one run.
type config struct {
	DatabaseURL string // a database this run may fill; "": a scratch one on $HERALD_TEST_POSTGRES_URL
	Rates       []int
	Phase, Tail time.Duration
	Backlog     int
	Conns       int // generator connections
	// Slices: the latency phases are read from stdin, slice by slice (bench.latencies).
	Slices bool

	// River's tuning.
	Workers           int
	FetchCooldown     time.Duration
	FetchPollInterval time.Duration
}

const group = "River"

func run(ctx context.Context, cfg config) error {
	if cfg.DatabaseURL == "" {
		u, drop, err := scratchDatabase(ctx)
		if err != nil {
			return err
		}
		defer drop()
		cfg.DatabaseURL = u
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("parse database URL: %w", err)
	}
	pcfg.MaxConns = int32(cfg.Conns + 10) // the generator's, and River's own (fetch, complete, listen, elect)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}

	res := result.New("river", "River: insert → work start at fixed rates, and the drain of a backlog, no-op worker")
	phases := fmt.Sprintf("open loop at %v jobs/s for %v each", cfg.Rates, cfg.Phase)
	if cfg.Slices {
		phases = "open loop in the slices read from stdin"
	}
	res.Load = fmt.Sprintf("%s, one job insert per transaction, %d writer connections; "+
		"then a backlog of %d jobs inserted before the workers start. River %d workers, FetchCooldown %v, FetchPollInterval %v",
		phases, cfg.Conns, cfg.Backlog, cfg.Workers, cfg.FetchCooldown, cfg.FetchPollInterval)
	b := &bench{cfg: cfg, pool: pool, res: res, started: newStarts()}
	if len(cfg.Rates) > 0 || cfg.Slices {
		if err := b.latencies(ctx, os.Stdin, os.Stdout); err != nil {
			return err
		}
	}
	if err := b.drain(ctx); err != nil {
		return err
	}
	return res.Write()
}

// scratchDatabase creates an empty database on the local stack's PostgreSQL and returns its
// URL and how to drop it.
func scratchDatabase(ctx context.Context) (string, func(), error) {
	admin := os.Getenv("HERALD_TEST_POSTGRES_URL")
	if admin == "" {
		return "", nil, fmt.Errorf("neither RIVER_BENCH_DATABASE_URL nor HERALD_TEST_POSTGRES_URL is set: " +
			`eval "$(deploy/local/stack.sh env)" first`)
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "river_bench_" + hex.EncodeToString(suffix)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", nil, fmt.Errorf("parse HERALD_TEST_POSTGRES_URL: %w", err)
	}
	u.Path = "/" + name
	drop := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err == nil {
			_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			conn.Close(ctx)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "river: drop database %s: %v\n", name, err)
		}
	}
	return u.String(), drop, nil
}
