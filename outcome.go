package herald

// AttemptOutcome is what one attempt of a delivery ended in: the outcome column of its
// delivery_attempt row. An attempt either called the provider (SENT, or the class of its
// error) or ended without a call (EXPIRED before the call; AMBIGUOUS when the reaper took a
// claim back whose call may or may not have happened). Like Status, the values are the ones
// the database stores and checks.
type AttemptOutcome string

const (
	AttemptSent      AttemptOutcome = "SENT"      // the provider accepted the message
	AttemptTransient AttemptOutcome = "TRANSIENT" // not taken; a later attempt may succeed
	AttemptPermanent AttemptOutcome = "PERMANENT" // not taken; retrying cannot help
	AttemptAmbiguous AttemptOutcome = "AMBIGUOUS" // the provider may have taken it
	AttemptExpired   AttemptOutcome = "EXPIRED"   // expired before the provider was called
)

// AttemptOutcomes lists every attempt outcome, in the order of the attempt log's check
// constraint.
func AttemptOutcomes() []AttemptOutcome {
	return []AttemptOutcome{AttemptSent, AttemptTransient, AttemptPermanent, AttemptAmbiguous, AttemptExpired}
}
