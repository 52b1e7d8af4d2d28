package settle

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/task/<tid>/stat (USER_HZ, 100 on
// every Linux architecture that herald's stack runs on).
const clockTick = 10 * time.Millisecond

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
// returns an error when there is none on this machine, as with a remote broker.
func FindBrokerJIT() (*BrokerJIT, error) {
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return nil, err
	}
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err != nil {
			continue // gone since the glob
		}
		args := bytes.Split(cmd, []byte{0})
		if len(args) > 0 && filepath.Base(string(args[0])) == "java" && bytes.Contains(cmd, []byte("\x00kafka.Kafka\x00")) {
			return &BrokerJIT{pid: filepath.Base(filepath.Dir(p))}, nil
		}
	}
	return nil, errors.New("no local Kafka broker process (java … kafka.Kafka)")
}

// CPU is the CPU time the broker's compiler threads (HotSpot's "C1 CompilerThre…" and
// "C2 CompilerThre…") have used since the broker started.
func (j *BrokerJIT) CPU() (time.Duration, error) {
	tasks, err := filepath.Glob(filepath.Join("/proc", j.pid, "task", "*"))
	if err != nil {
		return 0, err
	}
	if len(tasks) == 0 {
		return 0, fmt.Errorf("broker process %s is gone", j.pid)
	}
	var ticks int64
	for _, t := range tasks {
		comm, err := os.ReadFile(filepath.Join(t, "comm"))
		if err != nil || !strings.Contains(string(comm), "CompilerThre") {
			continue // a thread that ended, or not a compiler's
		}
		stat, err := os.ReadFile(filepath.Join(t, "stat"))
		if err != nil {
			continue
		}
		n, err := statCPU(stat)
		if err != nil {
			return 0, fmt.Errorf("%s/stat: %w", t, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// statCPU is utime + stime of a /proc/…/stat line, in clock ticks: fields 14 and 15, counted
// after the command name's closing parenthesis (the name may hold spaces).
func statCPU(stat []byte) (int64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(string(stat[i+1:])) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, errors.New("too few fields")
	}
	var sum int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}
