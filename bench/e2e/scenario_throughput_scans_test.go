package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/heraldhq/herald/internal/heraldtest"
)

// relationScans is, per table or index of the benchmark's database, the rows its scans
// returned so far: sequential scans' rows read (pg_stat_user_tables.seq_tup_read) and index
// entries read (pg_stat_user_indexes.idx_tup_read). These are the parts of pg_stat_database's
// tup_returned, by relation, so that a figure of rows returned per delivery names the scan.
type relationScans map[string]int64

func (s *stack) relationScans(b *testing.B) relationScans {
	b.Helper()
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
	heraldtest.Must(b, err)
	rows, err := s.pool.Query(ctx, `
		SELECT 'seq ' || relname, coalesce(seq_tup_read, 0) FROM pg_stat_user_tables
		UNION ALL
		SELECT 'index ' || indexrelname, coalesce(idx_tup_read, 0) FROM pg_stat_user_indexes`)
	heraldtest.Must(b, err)
	defer rows.Close()
	out := relationScans{}
	for rows.Next() {
		var name string
		var n int64
		heraldtest.Must(b, rows.Scan(&name, &n))
		out[name] = n
	}
	heraldtest.Must(b, rows.Err())
	return out
}

// topScans describes the relations whose scans returned the most rows per delivery since
// before, at most k of them, e.g. "seq delivery_p20261201 312.4, index … 2.0".
func topScans(before, after relationScans, deliveries, k int) string {
	type scan struct {
		name string
		per  float64
	}
	var all []scan
	for name, n := range after {
		if d := n - before[name]; d > 0 {
			all = append(all, scan{name, float64(d) / float64(deliveries)})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].per > all[j].per })
	parts := make([]string, 0, k)
	for _, sc := range all[:min(k, len(all))] {
		parts = append(parts, fmt.Sprintf("%s %.1f", sc.name, sc.per))
	}
	return strings.Join(parts, ", ")
}
