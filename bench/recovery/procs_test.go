package recovery

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldhq/herald/bench/internal/benchproc"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
	"github.com/heraldhq/herald/senders/sim"
)

// The processes are started with bench/internal/benchproc, as an operator runs herald: the
// binary, built once, as separate processes with flags and environment.

// startSim runs `herald sim` and returns the environment that points serve at it and its
// control URL.
func startSim(b *testing.B, bin string, extra ...string) (env map[string]string, url string) {
	b.Helper()
	dir := b.TempDir()
	p := benchproc.StartEnv(b, bin, "sim", nil, append([]string{"sim", "--sim-dir", dir, "--sim-http-addr", "127.0.0.1:0",
		"--sim-tls-addr", "127.0.0.1:0", "--sim-smtp-addr", "127.0.0.1:0"}, extra...)...)
	heraldtest.WaitFor(b, 30*time.Second, "herald sim to write its env file", func() bool {
		if !p.Alive() {
			b.Fatal("herald sim exited")
		}
		data, err := os.ReadFile(filepath.Join(dir, "herald.env"))
		if err != nil {
			return false
		}
		env = map[string]string{}
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok && strings.HasPrefix(line, "export ") {
				env[k] = strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'"), `'\''`, "'")
			}
		}
		return env["HERALD_SIM_URL"] != ""
	})
	return env, env["HERALD_SIM_URL"]
}

// simRecords returns every record of the simulator.
func simRecords(b *testing.B, url string) []sim.Record {
	b.Helper()
	recs, err := sim.FetchRecords(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	return recs
}

// serveArgs are the flags of every `herald serve` of one run: its own database, topics,
// slot, consumer groups and Redis prefix, and retries, sweeps and leases short enough for a
// bench (as cmd/herald's end-to-end tests run them).
func serveArgs(b *testing.B, dsn string, topics map[string]string, prefix, name string) []string {
	args := []string{
		"--database-url", dsn, "--database-max-conns", "16",
		"--kafka-brokers", strings.Join(stacktest.KafkaBrokers(b), ","),
		"--redis-addr", os.Getenv(stacktest.EnvRedis), "--redis-prefix", prefix,
		"--relay-slot", name, "--relay-publication", name + "_pub",
		"--kafka-session-timeout", "6s", "--log-format", "json", "--shutdown-timeout", "5s", "--admin-addr", "",
		"--retry-base", "100ms", "--retry-max", "1s", "--retry-max-attempts", "40",
		"--send-timeout", "4s", "--relay-sweep-interval", "250ms", "--relay-grace-period", "2s",
		"--relay-reap-interval", "1s", "--relay-sending-lease", "10s",
		"--relay-queued-lease-high", "15s", "--relay-queued-lease-normal", "15s", "--relay-queued-lease-low", "15s",
	}
	for _, p := range []string{"high", "normal", "low"} {
		args = append(args, "--topic-"+p, topics[p], "--dispatch-group-"+p, name+"_"+p)
	}
	return append(args, "--partitions-high", "4", "--partitions-normal", "4", "--partitions-low", "2")
}

// serve starts `herald serve` and waits until it answers /readyz on addr.
func serve(b *testing.B, bin, name, addr string, env map[string]string, args ...string) *benchproc.Proc {
	b.Helper()
	p := benchproc.StartEnv(b, bin, name, env, append([]string{"serve", "--http-addr", addr}, args...)...)
	heraldtest.WaitFor(b, 60*time.Second, "herald "+name+" to be ready", func() bool {
		if !p.Alive() {
			b.Fatalf("herald %s exited", name)
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}
