package delivery

import (
	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/day"
)

// DayBoundsForTest is the range of ids of the UTC day id was made in, as the day statements
// bound it.
func DayBoundsForTest(id uuid.UUID) (lo, hi uuid.UUID) {
	d := day.OfID(id)
	return d.Lower(), d.Add(1).Lower()
}

// DueSQLForTest lets the tests EXPLAIN the sweeper's query.
const DueSQLForTest = dueSQL

// The batch statements and their arguments, for the tests that EXPLAIN them.
var (
	ClaimBatchSQLForTest   = claimBatchSQL
	ClaimOneSQLForTest     = claimOneSQL
	RecordBatchSQLForTest  = recordBatchSQL
	ClaimBatchArgsForTest  = claimBatchArgs
	ClaimStatementForTest  = claimStatement
	RecordStatementForTest = recordStatement
	RecordBatchArgsForTest = recordBatchArgs
	ReapQueuedSQLForTest   = reapQueuedSQL
	InsertSQLForTest       = insertSQL
	InsertArgsForTest      = insertArgs
	MarkQueuedSQLForTest   = markQueuedSQL
	MarkQueuedArgsForTest  = markQueuedArgs
)
