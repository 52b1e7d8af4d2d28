package delivery_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/delivery"
	"github.com/heraldhq/herald/internal/stacktest"
)

// A statement that fails in QueryGeneric's transaction leaves a connection held by its caller
// usable: the next statement on it runs (the aborted transaction was ended).
func TestQueryGenericFailureLeavesTheConnectionUsable(t *testing.T) {
	t.Parallel()
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	none := func(pgx.Rows) error { return nil }
	require.Error(t, delivery.QueryGeneric(ctx, conn, `SELECT 1 / $1::int`, []any{0}, none), "division by zero")
	var one int
	require.NoError(t, delivery.QueryGeneric(ctx, conn, `SELECT $1::int`, []any{1}, func(rows pgx.Rows) error {
		for rows.Next() {
			if err := rows.Scan(&one); err != nil {
				return err
			}
		}
		return nil
	}))
	require.Equal(t, 1, one)
	require.Equal(t, byte('I'), conn.Conn().PgConn().TxStatus(), "no transaction left open")
}
