package ingest

import (
	"context"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/migrate"
)

// healthz answers 200 while the process serves HTTP at all (liveness).
func (a *API) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Dependencies /readyz names when one is not ready.
const (
	depPostgreSQL = "postgresql"
	depMigrations = "migrations"
)

// ReadyWhen adds a dependency of readiness: /readyz answers 503 naming dep while check
// returns an error. herald serve adds the components of the process's other roles (the
// relay, dispatch), so that a process is ready only once it can do all its work. Call it
// before the handler serves.
func (a *API) ReadyWhen(dep string, check func(context.Context) error) {
	a.readyChecks = append(a.readyChecks, readyCheck{dep: dep, check: check})
}

// readyCheck is one dependency added with ReadyWhen.
type readyCheck struct {
	dep   string
	check func(context.Context) error
}

// readyz answers 200 when PostgreSQL answers, every embedded migration is applied and every
// dependency added with ReadyWhen is ready, 503 otherwise (readiness). The answer names the dependency that is not ready and nothing more:
// the probe is unauthenticated, and a driver's error names hosts, users and databases. The
// error is logged.
func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.ReadyTimeout)
	defer cancel()
	if dep, err := a.ready(ctx); err != nil {
		a.log.Warn("not ready", zap.String("dependency", dep), zap.Error(err))
		writeProblem(w, newAPIError(http.StatusServiceUnavailable, codeNotReady, dep+" is not ready"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// ready returns the dependency that is not ready, and why.
func (a *API) ready(ctx context.Context) (string, error) {
	if err := a.pool.Ping(ctx); err != nil {
		return depPostgreSQL, fmt.Errorf("postgresql unreachable: %w", err)
	}
	if !a.migrated.Load() {
		pending, err := migrate.Pending(ctx, a.pool)
		if err != nil {
			return depMigrations, fmt.Errorf("migration state unknown: %w", err)
		}
		if pending {
			return depMigrations, fmt.Errorf("database migrations pending")
		}
		a.migrated.Store(true)
	}
	for _, c := range a.readyChecks {
		if err := c.check(ctx); err != nil {
			return c.dep, err
		}
	}
	return "", nil
}
