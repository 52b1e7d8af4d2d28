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

// readyz answers 200 when PostgreSQL answers and every embedded migration is applied, 503
// otherwise (readiness).
func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.ReadyTimeout)
	defer cancel()
	if err := a.ready(ctx); err != nil {
		a.log.Warn("not ready", zap.Error(err))
		writeProblem(w, newAPIError(http.StatusServiceUnavailable, codeNotReady, err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (a *API) ready(ctx context.Context) error {
	if err := a.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgresql unreachable: %w", err)
	}
	if a.migrated.Load() {
		return nil
	}
	pending, err := migrate.Pending(ctx, a.pool)
	if err != nil {
		return fmt.Errorf("migration state unknown: %w", err)
	}
	if pending {
		return fmt.Errorf("database migrations pending")
	}
	a.migrated.Store(true)
	return nil
}
