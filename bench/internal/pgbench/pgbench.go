// Package pgbench runs PostgreSQL's pgbench with herald's accept SQL
// (ingest/testdata/pgbench_accept.sql) on a scratch database: the reference that the ingest
// and throughput scenarios divide their figures by, measured in the same run.
package pgbench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/pgpool"
)

// Clients is the number of pgbench clients (-c), one connection each.
const Clients = 16

// Fixture is what the accept script assumes: its client id, template otp, users 1..1000 with
// stored contacts.
const Fixture = `
INSERT INTO api_client (id, name, key_prefix, key_hash)
VALUES ('01a229cf-0000-7000-8000-000000000001', 'pgbench', 'hk_x', '\x00');
INSERT INTO template (name, category, channels, content) VALUES ('otp', 'security', '{SMS,EMAIL}',
  '{"SMS":{"default":{"text":"Your code is {{.code}}"}},"EMAIL":{"default":{"subject":"Your code","text":"Your code is {{.code}}"}}}');
INSERT INTO user_contact (user_id, email, phone)
SELECT i, 'u' || i || '@example.com', '+1555' || lpad(i::text, 7, '0') FROM generate_series(1, 1000) AS i;`

// Prepare loads Fixture into the database at dbURL and analyzes the tables it filled, and only
// those. An ANALYZE of the empty tables the accept writes (idempotency_key, notification,
// delivery) tells the planner they hold nothing; a connection that prepares the accept's read
// then caches a generic plan that scans them whole, and keeps it while they grow until
// autovacuum analyzes them again: herald's pooled connections did, its read reading every
// row written so far (docs/benchmarks.md, "A plan made on empty tables"), while pgbench's
// connections, new in every slice, planned again. Never analyzed, as in a new deployment,
// they are planned by their size on disk, with index scans.
func Prepare(tb testing.TB, dbURL string) {
	tb.Helper()
	ctx := context.Background()
	pool, err := pgpool.New(ctx, dbURL, 0)
	heraldtest.Must(tb, err)
	defer pool.Close()
	_, err = pool.Exec(ctx, Fixture)
	heraldtest.Must(tb, err)
	_, err = pool.Exec(ctx, `VACUUM ANALYZE api_client, template, user_contact`)
	heraldtest.Must(tb, err)
}

// AcceptScript is the path of ingest/testdata/pgbench_accept.sql for a benchmark whose
// package lies two directories below the repository's root (bench/<name>).
func AcceptScript(tb testing.TB) string {
	tb.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "ingest", "testdata", "pgbench_accept.sql"))
	heraldtest.Must(tb, err)
	return script
}

var (
	txCount = regexp.MustCompile(`(?m)^number of transactions actually processed: (\d+)`)
	tps     = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
)

// Result is what one pgbench run did: the transactions it processed, the time they took
// (pgbench's own, without its connection setup: Tx ÷ tps) and pgbench's own CPU time, user
// and system (the client's share of the machine, not the server's).
type Result struct {
	Tx   int64
	Took time.Duration
	CPU  time.Duration
}

// Run runs script with Clients clients for d (whole seconds).
func Run(tb testing.TB, bin, script, dbURL string, d time.Duration) Result {
	tb.Helper()
	cmd := exec.Command(bin, "-n", "-M", "prepared", "-c", strconv.Itoa(Clients), "-j", "2",
		"-T", strconv.Itoa(int(d.Seconds())), "-f", script, dbURL)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tb.Fatalf("pgbench: %v\n%s", err, out.String())
	}
	m := txCount.FindStringSubmatch(out.String())
	if m == nil {
		tb.Fatalf("pgbench printed no transaction count:\n%s", out.String())
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	heraldtest.Must(tb, err)
	t := tps.FindStringSubmatch(out.String())
	if t == nil {
		tb.Fatalf("pgbench printed no tps:\n%s", out.String())
	}
	rate, err := strconv.ParseFloat(t[1], 64)
	heraldtest.Must(tb, err)
	if n == 0 || rate <= 0 {
		tb.Fatalf("pgbench processed no transaction:\n%s", out.String())
	}
	return Result{Tx: n, Took: time.Duration(float64(n) / rate * float64(time.Second)),
		CPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
}

// Find returns pgbench from PATH or from the PostgreSQL the local stack runs
// (deploy/local/stack.sh: /usr/lib/postgresql/15/bin).
func Find(tb testing.TB) string {
	tb.Helper()
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p
	}
	const stack = "/usr/lib/postgresql/15/bin/pgbench"
	if _, err := os.Stat(stack); err == nil {
		return stack
	}
	tb.Fatal("pgbench not found in PATH nor in /usr/lib/postgresql/15/bin: install PostgreSQL's client tools")
	return ""
}
