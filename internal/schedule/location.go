package schedule

import (
	"sync"
	"time"
	_ "time/tzdata" // IANA zones even on hosts without /usr/share/zoneinfo
)

// locations caches loaded time zones: time.LoadLocation reads and parses the zone file on
// every call, and dispatch needs the user's zone on every retry. Only zones that load are
// cached; their names are validated on input (ingest), so the set is small and bounded by
// the zone database.
var locations sync.Map // string → *time.Location

// Location returns the IANA time zone named name, loaded once per process. "" is UTC, as for
// time.LoadLocation.
func Location(name string) (*time.Location, error) {
	if loc, ok := locations.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	locations.Store(name, loc)
	return loc, nil
}

// LocationOrUTC is Location, with UTC for a zone that does not load (one removed from the
// zone database since it was stored).
func LocationOrUTC(name string) *time.Location {
	loc, err := Location(name)
	if err != nil {
		return time.UTC
	}
	return loc
}
