package delivery

// DueSQLForTest lets the tests EXPLAIN the sweeper's query.
const DueSQLForTest = dueSQL
