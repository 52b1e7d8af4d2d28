package schedule

import (
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pgTime is a `time` column value of minutes since midnight; negative: NULL.
func pgTime(minutes int) pgtype.Time {
	if minutes < 0 {
		return pgtype.Time{}
	}
	return pgtype.Time{Microseconds: int64(minutes) * 60e6, Valid: true}
}
