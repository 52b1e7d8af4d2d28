package deliverytest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// PlannedRelations runs EXPLAIN (ANALYZE, FORMAT JSON) of sql with args (which may begin with
// a pgx.QueryExecMode, as a statement's own call does) in a transaction it rolls back, and
// returns every relation the plan holds, the nodes that never ran included: what PostgreSQL
// planned, opened and locked for the statement. Partitions pruned at planning are missing.
func PlannedRelations(t testing.TB, db Beginner, sql string, args ...any) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // a read-only look: nothing to keep
	var plan []byte
	require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan))
	var doc []map[string]any
	require.NoError(t, json.Unmarshal(plan, &doc))
	var out []string
	var walk func(node map[string]any)
	walk = func(node map[string]any) {
		if r, ok := node["Relation Name"].(string); ok {
			out = append(out, r)
		}
		children, _ := node["Plans"].([]any)
		for _, c := range children {
			walk(c.(map[string]any))
		}
	}
	walk(doc[0]["Plan"].(map[string]any))
	return out
}
