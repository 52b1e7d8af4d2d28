package schedule

import (
	"fmt"
	"sort"
	"testing"
	"time"
)

// TestQuietEndMatchesMinuteByMinute compares QuietEnd with the rule computed the slow way,
// independently of time.Date and of zone bounds: walk a year minute by minute, note what the
// user's clock reads at each minute, and let the window of local date D run from the first
// minute the clock reads (D, Start) or later to the first minute it reads (D, End) or later
// ((D+1, End) across midnight). Every DST change of these zones happens on a whole minute, so
// the first such instant is a whole minute too.
func TestQuietEndMatchesMinuteByMinute(t *testing.T) {
	zones := []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago"}
	windows := []QuietHours{
		window("23:00", "02:30"), window("22:00", "07:00"), window("02:30", "06:00"),
		window("01:00", "04:00"), window("02:10", "02:40"), window("23:30", "00:30"),
		window("00:00", "07:00"), window("13:00", "15:30"), window("01:45", "02:15"),
	}
	from := time.Date(2025, 12, 29, 0, 0, 0, 0, time.UTC)
	to := time.Date(2027, 1, 3, 0, 0, 0, 0, time.UTC)
	n := int(to.Sub(from) / time.Minute)
	// Checked: every minute within a day of a change of the clock's rate (a DST change), and
	// every 29th minute elsewhere (all of them take minutes under -race; the 29th visits
	// every time of day over the year).
	const sparse = 29
	for _, zone := range zones {
		loc := mustLoc(t, zone)
		// reading[i]: the clock's reading at minute i, as minutes since 1970-01-01 of a clock
		// without zones; highest[i]: the highest reading up to minute i, which rises, so the
		// first minute that reads W or later is a binary search.
		reading := make([]int64, n)
		highest := make([]int64, n)
		for i := range n {
			lt := from.Add(time.Duration(i) * time.Minute).In(loc)
			wall := time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute(), 0, 0, time.UTC)
			reading[i] = wall.Unix() / 60
			highest[i] = reading[i]
			if i > 0 && highest[i-1] > highest[i] {
				highest[i] = highest[i-1]
			}
		}
		dense := make([]bool, n)
		for i := 1; i < n; i++ {
			if reading[i]-reading[i-1] != 1 {
				for j := max(0, i-1440); j < min(n, i+1440); j++ {
					dense[j] = true
				}
			}
		}
		first := func(y int, m time.Month, d int, tod time.Duration) int {
			w := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Add(tod).Unix() / 60
			return sort.Search(n, func(i int) bool { return highest[i] >= w })
		}
		for _, q := range windows {
			t.Run(fmt.Sprintf("%s %v-%v", zone, q.Start, q.End), func(t *testing.T) {
				until := make([]int, n) // the minute the window containing minute i ends; -1: not quiet
				for i := range until {
					until[i] = -1
				}
				for day := from.AddDate(0, 0, -2); day.Before(to.AddDate(0, 0, 2)); day = day.AddDate(0, 0, 1) {
					y, m, d := day.Date()
					endDay := d
					if q.Start > q.End {
						endDay++
					}
					s, e := first(y, m, d, q.Start), first(y, m, endDay, q.End)
					for i := s; i < e; i++ {
						until[i] = e
					}
				}
				// The last two days' windows may end past the walk: not checked.
				for i := 0; i < n-2*1440; i++ {
					if !dense[i] && i%sparse != 0 {
						continue
					}
					at := from.Add(time.Duration(i) * time.Minute)
					end, in := QuietEnd(at, loc, q)
					want := until[i] >= 0
					if in != want {
						t.Fatalf("%s (%s): quiet %v, want %v", at.In(loc).Format(time.RFC3339), at.Format(time.RFC3339), in, want)
					}
					if in && !end.Equal(from.Add(time.Duration(until[i])*time.Minute)) {
						t.Fatalf("%s: quiet until %s, want %s", at.In(loc).Format(time.RFC3339), end.Format(time.RFC3339),
							from.Add(time.Duration(until[i])*time.Minute).In(loc).Format(time.RFC3339))
					}
				}
			})
		}
	}
}
