package ingest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// unavailableRetryAfter is the Retry-After of a 503 unavailable, in seconds: a PostgreSQL
// restart or a managed failover takes seconds, and a client that retries sooner only adds
// load to the first seconds after it.
const unavailableRetryAfter = "2"

// databaseUnavailable reports whether err means that the database was not there to answer,
// and why, in words that carry no connection string, host, user or database name (the
// driver's message names them, so it is never logged or answered).
//
// Nothing the request meant to write is left half-written: every write of a request is one
// transaction, and a transaction whose connection is lost is rolled back. The one doubt is a
// COMMIT whose answer was lost: the transaction may have committed. A retry with the same
// Idempotency-Key then replays the stored answer instead of writing twice, so the client's
// rule is the same either way.
func databaseUnavailable(err error) (reason string, ok bool) {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The caller's own deadline or cancellation, not the database's absence (a connect
		// that timed out is a ConnectError, below).
		return "", false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection_exception
			return "connection exception (SQLSTATE " + pgErr.Code + ")", true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03":
			// admin_shutdown, crash_shutdown, cannot_connect_now (starting up, in recovery)
			return "server shutting down or starting (SQLSTATE " + pgErr.Code + ")", true
		case pgErr.Code == "53300": // too_many_connections
			return "too many connections (SQLSTATE 53300)", true
		case pgErr.Code == "25006": // read_only_sql_transaction: a failover left us on a standby
			return "read-only server (SQLSTATE 25006)", true
		}
		return "", false
	}
	var connectErr *pgconn.ConnectError
	switch {
	case errors.As(err, &connectErr):
		return "connect failed", true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "connection lost", true
	case pgconn.SafeToRetry(err):
		return "connection failed before the statement was sent", true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return "network error", true
	}
	return "", false
}

// unavailable is the answer of a request that failed because PostgreSQL could not be reached
// or went away under it (a restart, a failover, a network partition): a 503 with Retry-After,
// not a 500, since the request was valid and the same request, with the same
// Idempotency-Key, succeeds once the database is back.
func unavailable() *apiError {
	e := newAPIError(http.StatusServiceUnavailable, codeUnavailable,
		"the database is unavailable; retry after Retry-After with the same Idempotency-Key")
	e.retryAfter = unavailableRetryAfter
	return e
}
