package cdc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// Leadership is a session-level PostgreSQL advisory lock, keyed by the slot name, held on a
// session of its own (not a pooled connection, which could be reset or handed to someone
// else). The lock lives exactly as long as that session: a killed leader's lock is released
// when PostgreSQL sees its connection close, and a standby polling every LeaderRetry takes
// over. The slot is the last guard: PostgreSQL lets only one session stream from it, so a
// former leader that has not noticed its loss yet cannot stream alongside the new one.
const tryLockSQL = `SELECT pg_try_advisory_lock(hashtextextended('herald.cdc.slot.' || $1, 0))`

// campaign opens the lock session, waits until it holds the lock, then leads until the term
// ends. Closing the session releases the lock.
func (r *Relay) campaign(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(r.cfg.ConnString)
	if err != nil {
		return fmt.Errorf("parse connection string: %w", err)
	}
	cfg.RuntimeParams["application_name"] = "herald-relay-lock"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("open leader lock session: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()

	defer r.ready.Store(relayStarting)
	t := time.NewTicker(r.cfg.LeaderRetry)
	defer t.Stop()
	checked := false // the standby's checks (ready.go), once per term
	for {
		var got bool
		if err := conn.QueryRow(ctx, tryLockSQL, r.cfg.Slot).Scan(&got); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("try leader lock for slot %s: %w", r.cfg.Slot, err)
		}
		if got {
			break
		}
		if !checked {
			if err := r.checkStandby(ctx, conn); err != nil {
				return err
			}
			checked = true
			r.ready.Store(relayStandby)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}

	r.log.Info("acquired leadership")
	r.metrics.leader.Store(true)
	defer r.metrics.leader.Store(false)
	err = r.lead(ctx, conn)
	r.log.Info("gave up leadership", zap.Error(err))
	return err
}

// watchLock returns an error as soon as the lock session stops answering: the lock may
// already belong to another relay, so the term must end.
func (r *Relay) watchLock(ctx context.Context, conn *pgx.Conn) error {
	t := time.NewTicker(r.cfg.LeaderRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 2*r.cfg.LeaderRetry+time.Second)
		err := conn.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("leader lock session for slot %s lost: %w", r.cfg.Slot, err)
		}
	}
}
