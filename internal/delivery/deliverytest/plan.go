package deliverytest

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

// PlannedRelations runs EXPLAIN (ANALYZE, FORMAT JSON) of sql with args (which may begin with
// a pgx.QueryExecMode, as a statement's own call does) in a transaction it rolls back, and
// returns every relation the plan holds, the nodes that never ran included: what PostgreSQL
// planned, opened and locked for the statement. Partitions pruned at planning are missing.
func PlannedRelations(t testing.TB, db Beginner, sql string, args ...any) []string {
	t.Helper()
	return PlannedRelationsAfter(t, db, nil, sql, args...)
}

// PlannedRelationsAfter is PlannedRelations with setup statements run first in its
// transaction (e.g. "SET LOCAL plan_cache_mode = force_generic_plan").
func PlannedRelationsAfter(t testing.TB, db Beginner, setup []string, sql string, args ...any) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // a read-only look: nothing to keep
	for _, s := range setup {
		_, err := tx.Exec(ctx, s)
		require.NoError(t, err)
	}
	var plan []byte
	require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan))
	var doc []map[string]any
	require.NoError(t, json.Unmarshal(plan, &doc))
	var out []string
	walkPlan(doc[0]["Plan"].(map[string]any), func(node map[string]any) {
		if r, ok := node["Relation Name"].(string); ok {
			out = append(out, r)
		}
	})
	return out
}

// LockedRelationsAfter runs sql with args prepared (its cached statement: args may begin with
// a pgx.QueryExecMode, which is replaced) in a transaction it rolls back, after setup (e.g.
// "SET LOCAL plan_cache_mode = force_generic_plan"), and returns every relation the
// transaction then holds a lock on. That is what a generic plan holds: PostgreSQL locks every
// relation of a prepared statement's generic plan before it runs, partitions that run-time
// pruning skips included, so a partition of another day here is one the plan kept. (EXPLAIN
// cannot show it: it plans with the parameters' values as constants.)
func LockedRelationsAfter(t testing.TB, db Beginner, setup []string, sql string, args ...any) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // a look at the locks: nothing to keep
	for _, s := range setup {
		_, err := tx.Exec(ctx, s)
		require.NoError(t, err)
	}
	if len(args) > 0 {
		if _, ok := args[0].(pgx.QueryExecMode); ok {
			args = args[1:]
		}
	}
	rows, err := tx.Query(ctx, sql, append([]any{pgx.QueryExecModeCacheStatement}, args...)...)
	require.NoError(t, err)
	rows.Close()
	require.NoError(t, rows.Err())
	rows, err = tx.Query(ctx, `SELECT relation::regclass::text FROM pg_locks
		WHERE pid = pg_backend_pid() AND locktype = 'relation' AND relation IS NOT NULL`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

var dailyPartition = regexp.MustCompile(`^(notification|delivery|delivery_attempt)_[0-9]{8}$`)

// RequireOnlyPartitionsOf fails unless every daily partition in relations is one of allowed
// and the first of allowed is among them.
func RequireOnlyPartitionsOf(t testing.TB, relations []string, allowed ...string) {
	t.Helper()
	require.Contains(t, relations, allowed[0], "the statement read none of its rows' partitions")
	for _, r := range relations {
		if dailyPartition.MatchString(r) {
			require.Contains(t, allowed, r, "a partition of another day in the plan: %v", relations)
		}
	}
}

// OldDay creates the partitions of the day 20 days before the database's today (UTC) and of
// the day before it, and returns that day's midnight (UTC): the setting of tests that prove a
// statement about old rows holds only their days' partitions. (It returns a time, not a
// partition.Day, so that internal/partition's own tests may use this package.)
func OldDay(t testing.TB, db delivery.DB) time.Time {
	t.Helper()
	ctx := context.Background()
	var now time.Time
	require.NoError(t, db.QueryRow(ctx, `SELECT now()`).Scan(&now))
	y, m, d := now.UTC().Date()
	day := time.Date(y, m, d-20, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{day.AddDate(0, 0, -1), day} {
		_, err := db.Exec(ctx, `SELECT herald_create_partitions($1::date)`, at)
		require.NoError(t, err)
	}
	return day
}

// InsertAt writes a PENDING, due NORMAL SMS delivery whose id was made at dAt, for a
// notification of client made at nAt, and returns the notification's and the delivery's ids.
func InsertAt(t testing.TB, db delivery.DB, client string, nAt, dAt time.Time) (notificationID, deliveryID string) {
	t.Helper()
	nid, err := IDAt(nAt)
	require.NoError(t, err)
	did, err := IDAt(dAt)
	require.NoError(t, err)
	ok, err := delivery.Insert(context.Background(), db, delivery.Notification{ID: nid, ClientID: client,
		IdempotencyKey: uuid.NewString(), RequestHash: []byte{1}, UserID: 5, Template: "otp", Category: "security",
		Priority: herald.PriorityNormal, Response: []byte(`{}`),
		Deliveries: []delivery.New{{ID: did, Channel: herald.ChannelSMS}}})
	require.NoError(t, err)
	require.True(t, ok)
	return nid.String(), did.String()
}

// ScanReads runs EXPLAIN (ANALYZE, FORMAT JSON) of sql with args (as PlannedRelations) in a
// transaction it rolls back, and returns, per relation, the rows its scan nodes read:
// returned plus removed by a filter or an index recheck, times the node's loops. It is what a
// test holds a statement's reads to, independently of the plan's shape.
func ScanReads(t testing.TB, db Beginner, sql string, args ...any) map[string]float64 {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // a read-only look: nothing to keep
	var plan []byte
	require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan))
	var doc []map[string]any
	require.NoError(t, json.Unmarshal(plan, &doc))
	out := map[string]float64{}
	walkPlan(doc[0]["Plan"].(map[string]any), func(node map[string]any) {
		if r, ok := node["Relation Name"].(string); ok {
			out[r] += rowsRead(node)
		}
	})
	return out
}

// PreparedPlans sums, over the prepared statements of db's session that match where (a
// condition on pg_prepared_statements.statement, with args), how many times each ran on its
// generic plan and on a custom one.
func PreparedPlans(t testing.TB, db delivery.DB, where string, args ...any) (generic, custom int) {
	t.Helper()
	require.NoError(t, db.QueryRow(context.Background(), `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
		FROM pg_prepared_statements WHERE `+where+` AND statement NOT LIKE '%pg_prepared_statements%'`, args...).Scan(&generic, &custom))
	return generic, custom
}

// ExecutedScanReads runs run on a connection of its own to pool's database on which
// PostgreSQL's auto_explain reports the plan of every statement as it ran, on a generic plan
// wherever the statement is prepared (plan_cache_mode = force_generic_plan: what a day's
// statement runs on from its sixth call), and returns, per scan, the rows it read: returned
// plus removed by a filter, an index recheck or a join filter, times the node's loops,
// summed over the statements. A scan is named by its relation, or "cte <name>" or
// "function scan <alias>" for the scan of a CTE or of a function, "index <name>" for a bitmap
// index scan (which counts on its own beside its heap scan). A nested loop that rescans
// one side per row of the other shows as that side's reads multiplied by the batch.
func ExecutedScanReads(t testing.TB, pool *pgxpool.Pool, run func(ctx context.Context, conn *pgx.Conn)) map[string]float64 {
	t.Helper()
	ctx := context.Background()
	cfg := pool.Config().ConnConfig.Copy()
	var plans []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.HasPrefix(n.Message, "duration:") {
			plans = append(plans, n.Message[strings.Index(n.Message, "{"):])
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx) //nolint:errcheck // a test's own connection
	for _, s := range []string{"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
		"SET auto_explain.log_analyze = on", "SET auto_explain.log_timing = off", "SET auto_explain.log_format = json",
		"SET auto_explain.log_level = notice", "SET plan_cache_mode = force_generic_plan"} {
		_, err := conn.Exec(ctx, s)
		require.NoError(t, err)
	}
	run(ctx, conn)
	_, err = conn.Exec(ctx, "SET auto_explain.log_min_duration = -1")
	require.NoError(t, err)
	out := map[string]float64{}
	visit := func(node map[string]any) {
		if typ, _ := node["Node Type"].(string); strings.HasSuffix(typ, "Scan") {
			name := strings.ToLower(typ) + " " + fmt.Sprint(node["Alias"])
			if r, ok := node["Relation Name"].(string); ok {
				name = r
			} else if c, ok := node["CTE Name"].(string); ok {
				name = "cte " + c
			} else if i, ok := node["Index Name"].(string); ok {
				name = "index " + i
			}
			out[name] += rowsRead(node)
		}
		if removed := planNumber(node, "Rows Removed by Join Filter"); removed > 0 {
			out["join filter"] += removed * planNumber(node, "Actual Loops")
		}
	}
	for _, p := range plans {
		var doc struct {
			Plan map[string]any `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal([]byte(p), &doc), "auto_explain's plan: %s", p)
		walkPlan(doc.Plan, visit)
	}
	return out
}

// walkPlan calls visit on node, a plan node of EXPLAIN's JSON, and on every node below it.
func walkPlan(node map[string]any, visit func(node map[string]any)) {
	visit(node)
	children, _ := node["Plans"].([]any)
	for _, c := range children {
		walkPlan(c.(map[string]any), visit)
	}
}

// rowsRead is the rows plan node node read: returned plus removed by a filter or an index
// recheck, times its loops.
func rowsRead(node map[string]any) float64 {
	return (planNumber(node, "Actual Rows") + planNumber(node, "Rows Removed by Filter") +
		planNumber(node, "Rows Removed by Index Recheck")) * planNumber(node, "Actual Loops")
}

// planNumber is node's number k, 0 when it has none.
func planNumber(node map[string]any, k string) float64 {
	v, _ := node[k].(float64)
	return v
}
