package adapt

import (
	"cmp"
	"time"
)

// Signal is what the herald processes report about HIGH, read from the board: the worst of
// the fresh reports.
type Signal struct {
	// HighLatency is the largest recent HIGH accept → provider call latency (each dispatch
	// process's 90th percentile over its last interval); HighReports counts the processes
	// that reported one.
	HighLatency time.Duration
	HighReports int
	// RelayLag is the relay's lag behind the WAL (how long committed rows wait for it);
	// RelayReports counts the relays that reported one.
	RelayLag     time.Duration
	RelayReports int
}

// Targets are the bounds past which a signal says HIGH is congested.
type Targets struct {
	// HighLatency is HIGH's accept → provider call latency above which background work
	// shrinks. Default DefaultHighLatency.
	HighLatency time.Duration
	// RelayLag is the relay lag above which background work shrinks. Default
	// DefaultRelayLag.
	RelayLag time.Duration
	// Tolerance, when above 0, is how many times HIGH's calm latency on this machine its
	// latency may reach before background work shrinks, where that is more than HighLatency
	// (JudgeCalm). 0 (DefaultTolerance): HighLatency alone.
	Tolerance float64
}

// Defaults of Targets: HIGH's p99 target less a margin, and a relay lag at which a HIGH row
// committed behind a campaign's WAL would miss it.
const (
	DefaultHighLatency = 15 * time.Millisecond
	DefaultRelayLag    = 100 * time.Millisecond
	// DefaultTolerance is off: HIGH's absolute target alone decides, which favours HIGH's
	// latency over LOW's share where the machine cannot give HIGH that target
	// (docs/dispatch.md "Adaptive limits" has the trade measured).
	DefaultTolerance = 0.0
)

func (t Targets) withDefaults() Targets {
	t.HighLatency = cmp.Or(t.HighLatency, DefaultHighLatency)
	t.RelayLag = cmp.Or(t.RelayLag, DefaultRelayLag)
	return t
}

// Judge says what s means for background work: Unknown without any report, Congested when a
// report is past its target, Clear otherwise.
func (t Targets) Judge(s Signal) Verdict { return t.JudgeCalm(s, 0) }

// JudgeCalm is Judge with HIGH's target raised to Tolerance × calm, HIGH's calm latency on
// this machine (0: unknown), where that is larger: HIGH is congested when its latency is past
// both its absolute target and Tolerance times the latency this machine gives it when
// nothing surges. A Tolerance of 0 leaves the absolute target alone.
func (t Targets) JudgeCalm(s Signal, calm time.Duration) Verdict {
	t = t.withDefaults()
	high := max(t.HighLatency, time.Duration(t.Tolerance*float64(calm)))
	switch {
	case s.HighReports == 0 && s.RelayReports == 0:
		return Unknown
	case s.HighReports > 0 && s.HighLatency > high, s.RelayReports > 0 && s.RelayLag > t.RelayLag:
		return Congested
	}
	return Clear
}
