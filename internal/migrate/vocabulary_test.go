package migrate_test

import (
	"context"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/stacktest"
)

// The schema's CHECK constraints and the root package's lists are one vocabulary: a status
// added on one side only fails here.
func TestCheckConstraintsMatchTheVocabulary(t *testing.T) {
	pool := stacktest.Postgres(t)
	allowed := func(table, constraint string) []string {
		var def string
		require.NoError(t, pool.QueryRow(context.Background(), `
SELECT pg_get_constraintdef(oid) FROM pg_constraint
WHERE conrelid = $1::regclass AND conname = $2`, table, constraint).Scan(&def))
		var values []string
		for _, m := range regexp.MustCompile(`'([A-Z]+)'`).FindAllStringSubmatch(def, -1) {
			values = append(values, m[1])
		}
		slices.Sort(values)
		return values
	}
	sorted := func(v []string) []string { slices.Sort(v); return v }

	var statuses []string
	for _, s := range herald.Statuses() {
		statuses = append(statuses, string(s))
	}
	require.Equal(t, sorted(statuses), allowed("delivery", "delivery_status_check"))

	var campaign []string
	for _, s := range herald.CampaignStatuses() {
		campaign = append(campaign, string(s))
	}
	require.Equal(t, sorted(campaign), allowed("campaign", "campaign_status_check"))
}
