package redrive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/delivery"
)

// pickRedrive takes the RUNNING re-drive nobody is executing whose last lot is the oldest
// (every lot sets updated_at), so that re-drives take turns lot by lot. The row lock, held
// until the lot commits, is the mutual exclusion of its lots; SKIP LOCKED lets another
// executor take the next re-drive instead of waiting.
const pickRedrive = `
SELECT id, filter, include_permanent, expires_at, cursor_id, redriven, skipped
  FROM redrive WHERE status = 'RUNNING'
 ORDER BY updated_at LIMIT 1
   FOR NO KEY UPDATE SKIP LOCKED`

// advanceRedrive moves the cursor and the counts in the lot's transaction; a short lot ends
// the re-drive.
const advanceRedrive = `
UPDATE redrive SET cursor_id = $2, redriven = $3, skipped = $4,
       status = CASE WHEN $5 THEN 'DONE' ELSE status END,
       finished_at = CASE WHEN $5 THEN now() END, updated_at = now()
 WHERE id = $1`

// runLot executes the next lot of the RUNNING re-drive that waited longest and that no other
// executor holds, in one transaction: the next matches after the cursor are read and locked,
// those without a skip reason are re-armed by delivery.Redrive, and the cursor and counts
// move. It returns false when there was no re-drive to execute, and how many deliveries
// the lot re-armed.
func (x *Executor) runLot(ctx context.Context) (worked bool, armed int, err error) {
	err = pgx.BeginFunc(ctx, x.pool, func(tx pgx.Tx) error {
		// The lot's re-armed rows and the cursor commit together, so a commit lost in a crash
		// takes the cursor with it and the next executor runs the lot again: as a campaign's
		// lot, it need not wait for its WAL flush. The relay streams only flushed WAL, so it
		// never publishes a row of a lost commit.
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
			return fmt.Errorf("re-drive lot: %w", err)
		}
		var (
			id        uuid.UUID
			f         Filter
			inclPerm  bool
			expiresAt *time.Time
			cursor    *uuid.UUID
			redriven  int64
			skipped   map[string]int64
		)
		err := tx.QueryRow(ctx, pickRedrive).Scan(&id, &f, &inclPerm, &expiresAt, &cursor, &redriven, &skipped)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pick re-drive to execute: %w", err)
		}
		worked = true
		ms, err := lot(ctx, tx, id, &f, inclPerm, expiresAt, cursor, x.cfg.LotSize)
		if err != nil {
			return fmt.Errorf("re-drive %s: %w", id, err)
		}
		if skipped == nil {
			skipped = map[string]int64{}
		}
		arm := make([]delivery.Redrivable, 0, len(ms))
		for _, m := range ms {
			if m.skip != "" {
				skipped[m.skip]++
				continue
			}
			arm = append(arm, m.Redrivable)
		}
		done, err := delivery.Redrive(ctx, tx, id, expiresAt, arm)
		if err != nil {
			return err
		}
		armed = len(done)
		if n := len(arm) - armed; n > 0 {
			skipped[SkipMovedOn] += int64(n)
		}
		last := len(ms) < x.cfg.LotSize
		if len(ms) > 0 {
			c, err := uuid.Parse(ms[len(ms)-1].ID)
			if err != nil {
				return fmt.Errorf("re-drive %s: cursor %q: %w", id, ms[len(ms)-1].ID, err)
			}
			cursor = &c
		}
		if _, err := tx.Exec(ctx, advanceRedrive, id, cursor, redriven+int64(armed), skipped, last); err != nil {
			return fmt.Errorf("advance re-drive %s: %w", id, err)
		}
		if last {
			x.log.Info("re-drive done", zap.String("redrive_id", id.String()), zap.Int64("redriven", redriven+int64(armed)))
		}
		return nil
	})
	return worked, armed, err
}
