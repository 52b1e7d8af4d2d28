package cdc

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/heraldhq/herald"
)

// laneProgress tells the reaper how far each dispatch lane has got, so that it can return a
// QUEUED row whose record is no longer in Kafka's queue without waiting for the (long) QUEUED
// lease, and without ever touching a row whose record is still waiting behind a backlog.
//
// Every reaper pass takes a snapshot: the database time T (taken first), then the end offset
// of every partition of the priority's topic. A row marked QUEUED before T had its record
// acknowledged before T, so the record lies below those end offsets. Once the lane's consumer
// group has committed at or past every end offset of the snapshot — dispatch commits a record
// only after the row's outcome is recorded — every such record has been handled. A row still
// QUEUED with updated_at < T was therefore let go by its worker or its record was lost, and the
// reaper may return it at once. The watermark of a lane is the T of its newest snapshot the
// group has passed.
//
// It also tells whether the lane is moving at all: the time its group's committed offsets on
// the topic last advanced. While a lane moves, its QUEUED rows are waiting their turn and the
// QUEUED lease must not apply (see reaper).
type laneProgress struct {
	adm       *kadm.Client
	topics    map[herald.Priority]string
	groups    map[herald.Priority]string
	snaps     map[herald.Priority][]offsetSnapshot
	committed map[herald.Priority]map[int32]int64 // at the last pass
	movedAt   map[herald.Priority]time.Time       // database time the commits last advanced
}

type offsetSnapshot struct {
	at   time.Time       // database time, taken before the offsets
	ends map[int32]int64 // end offset by partition
}

func newLaneProgress(adm *kadm.Client, topics, groups map[herald.Priority]string) *laneProgress {
	return &laneProgress{adm: adm, topics: topics, groups: groups,
		snaps:     map[herald.Priority][]offsetSnapshot{},
		committed: map[herald.Priority]map[int32]int64{},
		movedAt:   map[herald.Priority]time.Time{},
	}
}

// watermark records a snapshot of p's topic at dbNow and returns the lane's watermark, or the
// zero time when there is none (no group configured, nothing committed yet, Kafka down).
// Snapshots older than keep are dropped: past the lease the reaper needs no watermark.
func (lp *laneProgress) watermark(ctx context.Context, p herald.Priority, dbNow time.Time, keep time.Duration) (time.Time, error) {
	group, topic := lp.groups[p], lp.topics[p]
	if group == "" {
		return time.Time{}, nil
	}
	listed, err := lp.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return time.Time{}, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	snap := offsetSnapshot{at: dbNow, ends: map[int32]int64{}}
	for part, lo := range listed[topic] {
		if lo.Err != nil {
			return time.Time{}, fmt.Errorf("list end offset of %s/%d: %w", topic, part, lo.Err)
		}
		snap.ends[part] = lo.Offset
	}
	if len(snap.ends) == 0 {
		return time.Time{}, fmt.Errorf("list end offsets of %s: no partitions", topic)
	}
	snaps := append(lp.snaps[p], snap)
	for len(snaps) > 1 && dbNow.Sub(snaps[0].at) > keep {
		snaps = snaps[1:]
	}
	lp.snaps[p] = snaps

	committed, err := lp.adm.FetchOffsets(ctx, group)
	if err != nil {
		return time.Time{}, fmt.Errorf("fetch offsets of group %s: %w", group, err)
	}
	lp.noteMovement(p, committed, topic, dbNow)
	for i := len(snaps) - 1; i >= 0; i-- {
		if passed(snaps[i], committed, topic) {
			lp.snaps[p] = snaps[i:] // older snapshots can never be the newest passed one again
			return snaps[i].at, nil
		}
	}
	return time.Time{}, nil
}

// noteMovement records dbNow as the lane's last movement if any committed offset of the
// topic advanced since the last pass.
func (lp *laneProgress) noteMovement(p herald.Priority, committed kadm.OffsetResponses, topic string, dbNow time.Time) {
	now := map[int32]int64{}
	for part, c := range committed[topic] {
		if c.Err == nil {
			now[part] = c.At
		}
	}
	if prev, seen := lp.committed[p]; seen {
		for part, at := range now {
			if at > prev[part] {
				lp.movedAt[p] = dbNow
				break
			}
		}
	}
	lp.committed[p] = now
}

// moving reports whether the lane's group committed progress on its topic within d of dbNow.
func (lp *laneProgress) moving(p herald.Priority, dbNow time.Time, d time.Duration) bool {
	at, ok := lp.movedAt[p]
	return ok && dbNow.Sub(at) < d
}

// passed reports whether the group's commits reach every end offset of s.
func passed(s offsetSnapshot, committed kadm.OffsetResponses, topic string) bool {
	for part, end := range s.ends {
		if end <= 0 {
			continue // nothing was ever produced there
		}
		c, ok := committed.Lookup(topic, part)
		if !ok || c.Err != nil || c.At < end {
			return false
		}
	}
	return true
}
