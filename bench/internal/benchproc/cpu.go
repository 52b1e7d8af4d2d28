package benchproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// userHZ is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const userHZ = 100

// statFields is /proc/<pid>/stat after the command name (field 3 on), parseStat.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, fmt.Errorf("read stat of process %d: %w", pid, err)
	}
	f, err := parseStat(b)
	if err != nil {
		return nil, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return f, nil
}

// parseStat splits a /proc/…/stat line into its fields after the command name (field 3 on):
// the name may hold spaces, so the fields are counted after its closing ')'.
func parseStat(stat []byte) ([]string, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, errors.New("no command name")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) <= statCSTime {
		return nil, errors.New("too few fields")
	}
	return f, nil
}

// StatCPU is the user + system CPU time of a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat
// line (a thread's, for the broker's compiler threads).
func StatCPU(stat []byte) (time.Duration, error) {
	f, err := parseStat(stat)
	if err != nil {
		return 0, err
	}
	n, err := ticks(f, statUTime, statSTime)
	if err != nil {
		return 0, err
	}
	return time.Duration(n) * time.Second / userHZ, nil
}

// ticks is the sum of the stat fields at the given indexes (of statFields), in USER_HZ.
func ticks(fields []string, idx ...int) (int64, error) {
	var sum int64
	for _, i := range idx {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse stat field %d: %w", i+3, err)
		}
		sum += n
	}
	return sum, nil
}

// The indexes in statFields of the fields CPU time is read from.
const (
	statPPID   = 1  // field 4
	statUTime  = 11 // field 14
	statSTime  = 12 // field 15
	statCUTime = 13 // field 16: children it has waited for
	statCSTime = 14 // field 17
)

// CPUOf is any process's user + system CPU time so far (/proc/<pid>/stat): a PostgreSQL
// backend's, the Kafka broker's.
func CPUOf(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read stat of process %d: %w", pid, err)
	}
	d, err := StatCPU(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return d, nil
}

// MachineCPU is the busy time of every core so far (/proc/stat: all but idle and iowait).
func MachineCPU() (time.Duration, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("read /proc/stat: %w", err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy int64
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		if i == 3 || i == 4 {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / userHZ, nil
}

// Postgres is a PostgreSQL server running on this machine, found through one of its
// sessions.
type Postgres struct{ pid int }

// FindPostgres finds the server that a session runs on from the session's backend pid (the
// postmaster is its parent). It fails when that is not a process of this machine.
func FindPostgres(ctx context.Context, db *pgxpool.Pool) (Postgres, error) {
	var backend int
	if err := db.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return Postgres{}, fmt.Errorf("read the backend pid: %w", err)
	}
	f, err := statFields(backend)
	if err != nil {
		return Postgres{}, fmt.Errorf("PostgreSQL is not on this machine: %w", err)
	}
	ppid, err := strconv.Atoi(f[statPPID])
	if err != nil {
		return Postgres{}, fmt.Errorf("parent of process %d: %w", backend, err)
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ppid))
	if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
		return Postgres{}, fmt.Errorf("the parent of backend %d (process %d) is not a postgres process", backend, ppid)
	}
	return Postgres{pid: ppid}, nil
}

// CPU is the server's CPU time so far: the postmaster's own, every process it has now
// (sessions, walsenders, background workers) and every one it has reaped, so that a session
// that began and ended between two readings counts whole. A session that has ended but is
// not reaped yet counts as a process it has: its time moves to the reaped children's when
// the postmaster waits for it, so it counts once either way.
func (p Postgres) CPU() (time.Duration, error) {
	f, err := statFields(p.pid)
	if err != nil {
		return 0, err
	}
	n, err := ticks(f, statUTime, statSTime, statCUTime, statCSTime)
	if err != nil {
		return 0, fmt.Errorf("postmaster %d: %w", p.pid, err)
	}
	err = p.eachChild(func(_ int, cf []string) {
		if c, err := ticks(cf, statUTime, statSTime); err == nil {
			n += c
		}
	})
	return time.Duration(n) * time.Second / userHZ, err
}

// Children is the set of the server's processes now.
func (p Postgres) Children() (map[int]bool, error) {
	kids := map[int]bool{}
	err := p.eachChild(func(pid int, _ []string) { kids[pid] = true })
	return kids, err
}

// eachChild calls fn with the pid and statFields of each process whose parent is the
// postmaster.
func (p Postgres) eachChild(fn func(pid int, fields []string)) error {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return err
	}
	parent := strconv.Itoa(p.pid)
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		cf, err := statFields(pid)
		if err != nil || cf[statPPID] != parent {
			continue // gone since the listing, or another's
		}
		fn(pid, cf)
	}
	return nil
}
