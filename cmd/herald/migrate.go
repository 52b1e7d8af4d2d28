package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldhq/herald/internal/migrate"
	"github.com/heraldhq/herald/internal/pgpool"
)

// commonConfig is what every subcommand that touches the database needs.
type commonConfig struct {
	DatabaseURL string
	MaxConns    int
	LogLevel    string
	LogFormat   string
	// sessionSettings are set on every session of the pools (startup parameters), e.g.
	// herald.events = off (--events=false).
	sessionSettings map[string]string
}

func (c *commonConfig) register(f *envFlags) {
	f.connString(&c.DatabaseURL, "database-url", "postgres://postgres@127.0.0.1:55432/herald?sslmode=disable", "PostgreSQL URL (TLS: sslmode=verify-full&sslrootcert=FILE, see docs/configuration.md)")
	f.Int(&c.MaxConns, "database-max-conns", 32, "most PostgreSQL connections in the pool")
	f.String(&c.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.String(&c.LogFormat, "log-format", "json", "log format: json or console")
}

// openPool opens a pool of c.MaxConns connections whose sessions are named name
// (application_name, unless the URL names them; docs/operations.md), with the session settings
// more beside c's (pgpool.ByKey for the relay's and dispatch's pools), and checks that one
// connects.
func openPool(ctx context.Context, c commonConfig, name string, more ...map[string]string) (*pgxpool.Pool, error) {
	cfg, err := poolConfig(c, name, more...)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return pool, nil
}

// poolConfig is the configuration of a pool of c.MaxConns sessions named name, with c's
// session settings and more.
func poolConfig(c commonConfig, name string, more ...map[string]string) (*pgxpool.Config, error) {
	cfg, err := pgpool.NewConfig(c.DatabaseURL, int32(c.MaxConns), append([]map[string]string{c.sessionSettings}, more...)...)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	pgpool.Named(cfg, name)
	return cfg, nil
}

// openRelayPool opens the relay's pool: relayPoolConns sessions named herald-relay, which
// plan by key (pgpool.ByKey).
func openRelayPool(ctx context.Context, c commonConfig) (*pgxpool.Pool, error) {
	c.MaxConns = relayPoolConns
	return openPool(ctx, c, "herald-relay", pgpool.ByKey())
}

// openDispatchPool opens dispatch's pool: conns sessions named herald-dispatch, which plan by
// key (pgpool.ByKey).
func openDispatchPool(ctx context.Context, c commonConfig, conns int) (*pgxpool.Pool, error) {
	c.MaxConns = conns
	return openPool(ctx, c, "herald-dispatch", pgpool.ByKey())
}

func runMigrate(ctx context.Context, args []string) error {
	var c commonConfig
	f := newFlags("migrate")
	c.register(f)
	if err := f.Parse(args); err != nil {
		return err
	}
	pool, err := openPool(ctx, c, "herald-migrate")
	if err != nil {
		return err
	}
	defer pool.Close()
	res, err := migrate.Up(ctx, pool)
	if err != nil {
		return err
	}
	if len(res) == 0 {
		fmt.Println("migrations: up to date")
	}
	for _, r := range res {
		fmt.Printf("migrations: applied %s (%s)\n", r.Source.Path, r.Duration.Round(1e6))
	}
	return nil
}
