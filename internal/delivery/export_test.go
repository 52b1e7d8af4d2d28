package delivery

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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
	ClaimBatchSQLForTest   = claimUnbounded[0][0]
	ClaimOneSQLForTest     = claimUnbounded[0][1]
	RecordBatchSQLForTest  = recordBatchSQL
	ClaimBatchArgsForTest  = claimBatchArgs
	ClaimStatementForTest  = func(seen []Seen) (string, pgx.QueryExecMode) { return claimStatement(seen, false) }
	RecordStatementForTest = recordStatement
	RecordBatchArgsForTest = recordBatchArgs
	ReapQueuedSQLForTest   = reapQueuedSQL
	InsertSQLForTest       = insertSQL
	InsertPromptSQLForTest = insertPromptSQL
	InsertArgsForTest      = insertArgs
	MarkQueuedSQLForTest   = markQueuedSQL
	MarkQueuedArgsForTest  = markQueuedArgs
)
