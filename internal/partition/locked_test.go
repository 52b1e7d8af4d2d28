package partition

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// TestLockTimeoutAndDeadlockKeepTheDay: a lock_timeout and a deadlock, however wrapped, are
// both a drop that did not get its locks (the day is kept as locked for the next pass);
// any other error is an error.
func TestLockTimeoutAndDeadlockKeepTheDay(t *testing.T) {
	wrap := func(code string) error {
		return fmt.Errorf("drop partitions of 2026-10-18: %w", &pgconn.PgError{Code: code})
	}
	require.True(t, isLockTimeout(wrap("55P03")), "lock_timeout")
	require.True(t, isLockTimeout(wrap("40P01")), "deadlock")
	require.False(t, isLockTimeout(wrap("42P01")), "undefined table")
	require.False(t, isLockTimeout(errors.New("connection reset")))
	require.False(t, isLockTimeout(nil))
}
