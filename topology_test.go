package herald_test

import (
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald"
)

func TestTopologyDefaultsAreValid(t *testing.T) {
	top := herald.Topology{SendingHold: time.Minute}.WithDefaults()
	if err := top.Validate(); err != nil {
		t.Fatal(err)
	}
	if top.Topics[herald.PriorityHigh] != "notifications.high" || top.Groups[herald.PriorityLow] != "herald-dispatch-low" ||
		top.Slot != herald.DefaultSlot || top.RedisPrefix != "herald:" || top.SendingLease != 5*time.Minute {
		t.Fatalf("defaults: %+v", top)
	}
}

func TestTopologyValidate(t *testing.T) {
	cases := []struct {
		name   string
		change func(*herald.Topology)
		want   string
	}{
		{"shared topic", func(t *herald.Topology) { t.Topics[herald.PriorityLow] = t.Topics[herald.PriorityHigh] }, `topic "notifications.high" used by HIGH and LOW`},
		{"no topic", func(t *herald.Topology) { t.Topics[herald.PriorityNormal] = "" }, "no topic for NORMAL"},
		{"shared group", func(t *herald.Topology) { t.Groups[herald.PriorityNormal] = t.Groups[herald.PriorityHigh] }, "used by HIGH and NORMAL"},
		{"slot", func(t *herald.Topology) { t.Slot = "Relay; DROP" }, "slot name"},
		{"publication", func(t *herald.Topology) { t.Publication = "" }, "publication name"},
		{"redis prefix", func(t *herald.Topology) { t.RedisPrefix = "" }, "empty Redis prefix"},
		{"lease not longer than the hold", func(t *herald.Topology) { t.SendingLease = t.SendingHold }, "must exceed what a dispatch worker may hold"},
		{"negative lease", func(t *herald.Topology) { t.SendingLease = -time.Second }, "SENDING lease -1s <= 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			top := herald.Topology{SendingHold: 40 * time.Second}.WithDefaults()
			tc.change(&top)
			err := top.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	unknownHold := herald.Topology{SendingLease: time.Second}.WithDefaults()
	if err := unknownHold.Validate(); err != nil {
		t.Fatalf("no dispatch config, no lease rule: %v", err)
	}
}

func TestStatusLists(t *testing.T) {
	if got := len(herald.Statuses()); got != 9 {
		t.Fatalf("%d statuses", got)
	}
	final := 0
	for _, s := range herald.Statuses() {
		if s.Terminal() {
			final++
		}
	}
	if final != 6 {
		t.Fatalf("%d final statuses, want 6", final)
	}
	s := herald.Statuses()
	s[0] = "X"
	if herald.Statuses()[0] != herald.StatusPending {
		t.Fatal("Statuses shares its slice")
	}
	if got := len(herald.CampaignStatuses()); got != 5 {
		t.Fatalf("%d campaign statuses", got)
	}
}
