package partition

import (
	"fmt"
	"regexp"
	"time"

	"github.com/google/uuid"

	"github.com/heraldhq/herald/internal/day"
)

// Tables are the partitioned tables, in the order a day's partitions are dropped (an
// attempt partition references its delivery partition; the status events of delivery_event,
// migration 00090, reference nothing and go with their day).
var Tables = []string{"delivery_event", "delivery_attempt", "delivery", "notification"}

// Day is a UTC calendar day: midnight UTC of it (internal/day).
type Day = day.Day

// DayOf returns the UTC day of t.
func DayOf(t time.Time) Day { return day.Of(t) }

// DayOfID returns the UTC day in which a UUIDv7 was made.
func DayOfID(id uuid.UUID) Day { return day.OfID(id) }

// ByDay groups ids (UUIDv7s in text) by the UTC day they were made (day.ByDay).
func ByDay(ids []string) map[Day][]string { return day.ByDay(ids) }

var partitionName = regexp.MustCompile(`^(notification|delivery|delivery_attempt|delivery_event)_([0-9]{8})$`)

// parseName returns the table and day of a partition name made by Name.
func parseName(name string) (string, Day, error) {
	m := partitionName.FindStringSubmatch(name)
	if m == nil {
		return "", Day{}, fmt.Errorf("%q is not a daily partition name", name)
	}
	t, err := time.Parse("20060102", m[2])
	if err != nil {
		return "", Day{}, fmt.Errorf("partition %q: %w", name, err)
	}
	return m[1], Day(t), nil
}
