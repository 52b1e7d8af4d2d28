package delivery

import (
	"context"
	"time"

	"github.com/heraldhq/herald"
)

// Outcome is what a claimed attempt ended in.
type Outcome struct {
	Status       herald.Status         // SENT, PENDING (retry), FAILED or EXPIRED
	AttemptClass herald.AttemptOutcome // the attempt row's outcome
	RetryIn      time.Duration         // PENDING only: from now() to next_attempt_at
	Error        string
	Provider     string
	ProviderID   string
	ProviderCode string
	// TokensRemoved is how many push tokens the provider reported invalid in this attempt
	// (dispatch removes them from the user's profile); the attempt row keeps the count.
	TokensRemoved int
}

// Record is RecordBatch for one attempt: it writes o for claimed attempt attempt, started at
// startedAt, and returns false when the row was no longer this attempt's.
func Record(ctx context.Context, db DB, id string, attempt int, startedAt time.Time, o Outcome) (bool, error) {
	recorded, err := RecordBatch(ctx, db, []Recording{{ID: id, Attempt: attempt, StartedAt: startedAt, Outcome: o}})
	return len(recorded) == 1, err
}
