package redrive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldhq/herald/internal/delivery"
)

const selectByKey = `
SELECT request_hash, response FROM redrive WHERE client_id = $1 AND idempotency_key = $2`

// insertRedrive writes the re-drive; ON CONFLICT makes a concurrent request with the same
// Idempotency-Key wait for the first and then insert nothing (as the campaign insert does).
const insertRedrive = `
INSERT INTO redrive (id, client_id, idempotency_key, request_hash, response, filter, dry_run,
                     include_permanent, expires_at, status, matched, skipped, finished_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, CASE WHEN $10 = 'DONE' THEN now() END)
ON CONFLICT (client_id, idempotency_key) DO NOTHING`

// Answer is the stored 202 answer of a POST, replayed for its Idempotency-Key. Skipped of a
// dry run counts what would be skipped; of a real run it starts empty and GET shows it grow.
type Answer struct {
	ID       string           `json:"id"`
	Status   string           `json:"status"`
	DryRun   bool             `json:"dryRun"`
	Matched  int64            `json:"matched"`
	Redriven int64            `json:"redriven"`
	Skipped  map[string]int64 `json:"skipped"`
}

// Create checks req (Check, then expiresAt against the database clock), counts the
// deliveries it matches and writes the re-drive of clientID under Idempotency-Key key, in
// one transaction; with the same key and the same request it returns the first answer and
// replayed = true. A dry run is written DONE with what would be skipped; a real one RUNNING,
// for an Executor to take. More than max matches (0: DefaultMax) is a *TooManyError and
// writes nothing, as does every other error.
func Create(ctx context.Context, pool *pgxpool.Pool, clientID, key string, req Request, max int64) (ans *Answer, replayed bool, err error) {
	if err := req.Check(); err != nil {
		return nil, false, err
	}
	if max <= 0 {
		max = DefaultMax
	}
	hash := req.hash()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		ans, replayed, err = replay(ctx, tx, clientID, key, hash)
		if err != nil || ans != nil {
			return err
		}
		if req.ExpiresAt != nil {
			var now time.Time
			if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
				return fmt.Errorf("read database clock: %w", err)
			}
			if !req.ExpiresAt.After(now) {
				return &InvalidError{Fields: []FieldError{{Field: "expiresAt", Message: "must be in the future"}}}
			}
		}
		matched, skipped, err := count(ctx, tx, &req.Filter, req.IncludePermanent, req.ExpiresAt)
		if err != nil {
			return err
		}
		if matched > max {
			return &TooManyError{Matched: matched, Max: max}
		}
		id, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("new re-drive id: %w", err)
		}
		ans = &Answer{ID: id.String(), Status: StatusRunning, DryRun: req.DryRun, Matched: matched, Skipped: map[string]int64{}}
		if req.DryRun || matched == 0 {
			ans.Status = StatusDone
		}
		if req.DryRun {
			ans.Skipped = skipped
		}
		filter, err := json.Marshal(req.Filter)
		if err != nil {
			return fmt.Errorf("encode filter of re-drive %s: %w", id, err)
		}
		tag, err := tx.Exec(ctx, insertRedrive, id, clientID, key, hash, ans, filter, req.DryRun,
			req.IncludePermanent, req.ExpiresAt, ans.Status, matched, ans.Skipped)
		if err != nil {
			return fmt.Errorf("insert re-drive %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			// A concurrent request with the same key committed first; its answer is ours.
			ans, replayed, err = replay(ctx, tx, clientID, key, hash)
		}
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return ans, replayed, nil
}

// replay returns the stored answer of an earlier re-drive with the same key (nil when there
// is none), or ErrKeyReused when its request differed.
func replay(ctx context.Context, tx pgx.Tx, clientID, key string, hash []byte) (*Answer, bool, error) {
	var storedHash []byte
	var stored Answer
	err := tx.QueryRow(ctx, selectByKey, clientID, key).Scan(&storedHash, &stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read re-drive for idempotency key of client %s: %w", clientID, err)
	}
	if !bytes.Equal(hash, storedHash) {
		return nil, false, ErrKeyReused
	}
	return &stored, true, nil
}

const selectRedrive = `
SELECT client_id::text, status, dry_run, matched, redriven, skipped, filter, include_permanent,
       expires_at, created_at, finished_at
  FROM redrive WHERE id = $1`

// Get reads re-drive id; ErrNotFound when there is none. Re-drives are an operator's: any
// operator key reads any of them.
func Get(ctx context.Context, db delivery.DB, id uuid.UUID) (*Redrive, error) {
	r := &Redrive{ID: id}
	err := db.QueryRow(ctx, selectRedrive, id).Scan(&r.ClientID, &r.Status, &r.DryRun, &r.Matched, &r.Redriven,
		&r.Skipped, &r.Filter, &r.IncludePermanent, &r.ExpiresAt, &r.CreatedAt, &r.FinishedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read re-drive %s: %w", id, err)
	}
	if r.Skipped == nil {
		r.Skipped = map[string]int64{}
	}
	return r, nil
}

// Answer returns r in the shape of the POST answer.
func (r *Redrive) Answer() *Answer {
	return &Answer{ID: r.ID.String(), Status: r.Status, DryRun: r.DryRun, Matched: r.Matched,
		Redriven: r.Redriven, Skipped: r.Skipped}
}

const selectRecent = `
SELECT id, client_id::text, status, dry_run, matched, redriven, skipped, filter, include_permanent,
       expires_at, created_at, finished_at
  FROM redrive ORDER BY id DESC LIMIT $1`

// Recent returns the last limit re-drives, newest first (ids are UUIDv7: creation order).
func Recent(ctx context.Context, db delivery.DB, limit int) ([]Redrive, error) {
	rows, err := db.Query(ctx, selectRecent, limit)
	if err != nil {
		return nil, fmt.Errorf("read recent re-drives: %w", err)
	}
	var out []Redrive
	var r Redrive
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.ClientID, &r.Status, &r.DryRun, &r.Matched, &r.Redriven, &r.Skipped,
		&r.Filter, &r.IncludePermanent, &r.ExpiresAt, &r.CreatedAt, &r.FinishedAt}, func() error {
		out = append(out, r)
		r = Redrive{}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read recent re-drives: %w", err)
	}
	return out, nil
}
