package settle

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/heraldhq/herald/bench/internal/benchproc"
)

// BrokerJIT reads how much CPU the local Kafka broker's just-in-time compiler threads have
// used. A broker that has just started (as in a fresh clone's `make bench`) compiles its
// produce and fetch paths while the first scenario measures, with HotSpot's C2 compiler
// taking up to a core for tens of seconds on a 2-core machine, at the broker's raised
// priority (deploy/local/kafka.sh): a relay scenario run right after the stack started had
// herald's p99 at 1,000 rows/s at 254 ms, the next one on the same stack at 35 ms
// (docs/benchmarks.md, "The broker's compiler, before the relay is measured").
type BrokerJIT struct {
	pid string
}

// FindBrokerJIT finds the local broker's process (a java process running kafka.Kafka). It
// returns an error when there is none on this machine, as with a remote broker, or more than
// one, when it cannot tell which one the benchmark uses.
func FindBrokerJIT() (*BrokerJIT, error) {
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return nil, err
	}
	var found []string
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err != nil {
			continue // gone since the glob
		}
		args := bytes.Split(cmd, []byte{0})
		if len(args) > 0 && filepath.Base(string(args[0])) == "java" && bytes.Contains(cmd, []byte("\x00kafka.Kafka\x00")) {
			found = append(found, filepath.Base(filepath.Dir(p)))
		}
	}
	switch len(found) {
	case 0:
		return nil, errors.New("no local Kafka broker process (java … kafka.Kafka)")
	case 1:
		return &BrokerJIT{pid: found[0]}, nil
	default:
		return nil, fmt.Errorf("%d local Kafka broker processes (pids %s)", len(found), strings.Join(found, ", "))
	}
}

// PID is the broker's process id.
func (j *BrokerJIT) PID() string { return j.pid }

// JITSample is the CPU time each of the broker's compiler threads had used when sampled, by
// thread id.
type JITSample map[string]time.Duration

// Since is the CPU time the compiler threads used from s0 to s: each thread's increase, and
// the whole time of a thread that started in between. ok is false when a thread of s0 ended
// in between (HotSpot ends compiler threads it no longer needs), whose last CPU time is lost:
// the figure is then a lower bound.
func (s JITSample) Since(s0 JITSample) (d time.Duration, ok bool) {
	ok = true
	for tid, t := range s {
		d += t - s0[tid]
	}
	for tid := range s0 {
		if _, alive := s[tid]; !alive {
			ok = false
		}
	}
	return d, ok
}

// Sample reads the CPU time the broker's compiler threads (HotSpot's "C1 CompilerThre…" and
// "C2 CompilerThre…") have used since each started.
func (j *BrokerJIT) Sample() (JITSample, error) {
	tasks, err := filepath.Glob(filepath.Join("/proc", j.pid, "task", "*"))
	if err != nil {
		return nil, err
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("broker process %s is gone", j.pid)
	}
	out := JITSample{}
	for _, t := range tasks {
		comm, err := os.ReadFile(filepath.Join(t, "comm"))
		if err != nil || !strings.Contains(string(comm), "CompilerThre") {
			continue // a thread that ended, or not a compiler's
		}
		stat, err := os.ReadFile(filepath.Join(t, "stat"))
		if err != nil {
			continue
		}
		d, err := benchproc.StatCPU(stat)
		if err != nil {
			return nil, fmt.Errorf("%s/stat: %w", t, err)
		}
		out[filepath.Base(t)] = d
	}
	return out, nil
}
