// Package schedule decides when a delivery may go: the first attempt (sendAt, then quiet
// hours), the delay before a retry (exponential backoff with full jitter, the provider's
// Retry-After), and the end of a user's quiet hours, which both the recipient rules
// (internal/recipient: the first attempt of a POST or of a campaign lot's user) and dispatch
// (every retry) apply with the same rule. The rule for quiet hours across DST
// changes is written in docs/architecture.md ("Quiet hours"); the table test in
// quiet_test.go pins it and quiet_property_test.go checks it against a minute-by-minute
// definition over a year.
package schedule
