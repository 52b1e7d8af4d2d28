package redrive

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/heraldhq/herald"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestCheck: the rules of a request, and its normalization (what the Idempotency-Key hash
// covers).
func TestCheck(t *testing.T) {
	t1 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	failed, expired := herald.StatusFailed, herald.StatusExpired
	for _, tc := range []struct {
		name   string
		req    Request
		err    error
		fields []string
	}{
		{"status only", Request{Filter: Filter{Status: []herald.Status{failed}}}, nil, nil},
		{"time only", Request{Filter: Filter{From: &t1}, ExpiresAt: &t2}, nil, nil},
		{"unbounded", Request{Filter: Filter{Channel: herald.ChannelSMS}}, ErrUnbounded, nil},
		{"expired without expiresAt", Request{Filter: Filter{Status: []herald.Status{failed, expired}}}, ErrExpiresAtRequired, nil},
		{"time only means both statuses", Request{Filter: Filter{To: &t2}}, ErrExpiresAtRequired, nil},
		{"undelivered", Request{Filter: Filter{Status: []herald.Status{StatusUndelivered}}}, ErrStatusNotSupported, nil},
		{"bad values", Request{Filter: Filter{Status: []herald.Status{"SENT"}, Channel: "FAX", ErrorClass: "FATAL", From: &t2, To: &t1}}, nil,
			[]string{"filter.channel", "filter.errorClass", "filter.status[0]", "filter.to"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Check()
			switch {
			case tc.fields != nil:
				var inv *InvalidError
				require.ErrorAs(t, err, &inv)
				var got []string
				for _, f := range inv.Fields {
					got = append(got, f.Field)
				}
				require.Equal(t, tc.fields, got)
			case tc.err != nil:
				require.ErrorIs(t, err, tc.err)
			default:
				require.NoError(t, err)
			}
		})
	}
	a := Request{Filter: Filter{Status: []herald.Status{failed, failed}}}
	b := Request{Filter: Filter{Status: []herald.Status{failed}}}
	require.NoError(t, a.Check())
	require.NoError(t, b.Check())
	require.Equal(t, a.hash(), b.hash(), "a repeated status is the same request")
	c := Request{Filter: Filter{}, ExpiresAt: &t2}
	c.Filter.From = &t1
	require.NoError(t, c.Check())
	require.Equal(t, []herald.Status{expired, failed}, c.Filter.Status, "the default statuses, sorted")
}
