package sim

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// TestFetchRecordsReadsEveryPage: more records than one page of GET /records come back whole
// and in order; once the simulator has dropped records, FetchRecords refuses to return a
// partial list.
func TestFetchRecordsReadsEveryPage(t *testing.T) {
	s, err := New(Config{MaxRecords: 30_000}, zap.NewNop())
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for range 25_001 {
		s.records.add(Record{Provider: Twilio, Outcome: Accepted, Key: "k"})
	}
	recs, err := FetchRecords(t.Context(), srv.URL)
	require.NoError(t, err)
	require.Len(t, recs, 25_001)
	for i, r := range recs {
		require.EqualValues(t, i+1, r.Seq)
	}

	for range 10_000 {
		s.records.add(Record{Provider: Twilio, Outcome: Accepted, Key: "k"})
	}
	_, err = FetchRecords(t.Context(), srv.URL)
	require.ErrorContains(t, err, "dropped")
}
