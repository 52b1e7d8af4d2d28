package delivery

// DueSQLForTest lets the tests EXPLAIN the sweeper's query.
const DueSQLForTest = dueSQL

// The batch statements and their arguments, for the tests that EXPLAIN them.
var (
	ClaimBatchSQLForTest   = claimBatchSQL
	ClaimOneSQLForTest     = claimOneSQL
	RecordBatchSQLForTest  = recordBatchSQL
	ClaimBatchArgsForTest  = claimBatchArgs
	RecordBatchArgsForTest = recordBatchArgs
	ReapQueuedSQLForTest   = reapQueuedSQL
	InsertSQLForTest       = insertSQL
	InsertArgsForTest      = insertArgs
	MarkQueuedSQLForTest   = markQueuedSQL
	MarkQueuedArgsForTest  = markQueuedArgs
)
