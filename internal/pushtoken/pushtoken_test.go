package pushtoken_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/pushtoken"
	"github.com/heraldhq/herald/internal/stacktest"
)

func TestReplaceReadDrop(t *testing.T) {
	pool := stacktest.Postgres(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO user_contact (user_id) VALUES (7)`)
	require.NoError(t, err)
	read := func() (tokens, platforms []string, has bool, js string) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT `+pushtoken.ContactArrays+`, `+pushtoken.ContactHasAny+`,
       (SELECT `+pushtoken.NotificationJSON+`::text FROM (SELECT 7 AS user_id) AS n)
FROM user_contact c WHERE c.user_id = 7`).Scan(&tokens, &platforms, &has, &js))
		return
	}
	tokens, _, has, js := read()
	require.Empty(t, tokens)
	require.False(t, has)
	require.Equal(t, "[]", js)

	require.NoError(t, pushtoken.Replace(ctx, pool, 7, []string{"b", "a"}, []string{"APNS", "FCM"}))
	tokens, platforms, has, js := read()
	require.Equal(t, []string{"a", "b"}, tokens)
	require.Equal(t, []string{"FCM", "APNS"}, platforms)
	require.True(t, has)
	require.JSONEq(t, `[{"token":"b","platform":"APNS"},{"token":"a","platform":"FCM"}]`, js)

	require.NoError(t, pushtoken.Replace(ctx, pool, 7, []string{"c"}, []string{"FCM"}), "replaces, not adds")
	tokens, _, _, _ = read()
	require.Equal(t, []string{"c"}, tokens)

	n, err := pushtoken.Drop(ctx, pool, 7, []string{"c", "unknown"})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	_, _, has, _ = read()
	require.False(t, has)
}
