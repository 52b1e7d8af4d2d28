// Command river measures River (github.com/riverqueue/river), the PostgreSQL job queue a Go
// team might pick instead of herald's relay and Kafka, on the relay scenario's load: insert →
// work-start latency at fixed rates, open loop, one job insert per transaction, and the
// drain rate of a backlog inserted before the workers start, with a no-op worker. It writes
// its figures as group "River" (bench/result; $BENCH_RESULT_DIR/river.json when set), which
// bench/relay's BenchmarkScenarioRelay merges into the relay scenario.
//
// It lives in its own module so that herald's go.mod does not carry River. Run alone:
//
//	eval "$(deploy/local/stack.sh env)"
//	cd bench/river && go run .              # a scratch database of its own, dropped at the end
//	BENCH_SCALE=0.1 go run . -workers 100   # smaller, other tuning
//	go run . -rates '' -backlog 100000      # the no-op drain alone (the throughput scenario's)
//	printf '1000 2s\n1000 2s\n' | go run . -slices   # phases in slices, as bench/relay interleaves them with herald's
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/heraldhq/herald/bench/result"
)

func main() {
	cfg := config{
		DatabaseURL: os.Getenv("RIVER_BENCH_DATABASE_URL"),
		Phase:       time.Duration(result.Scaled(10_000, 1_000)) * time.Millisecond,
		Tail:        time.Duration(result.Scaled(5_000, 1_000)) * time.Millisecond,
		Backlog:     result.Scaled(100_000, 1_000),
	}
	rates := flag.String("rates", "100,1000,5000", "insert rates, jobs/s, comma separated; empty: the drain alone")
	flag.DurationVar(&cfg.Phase, "phase", cfg.Phase, "length of each rate's phase (default: 10 s × BENCH_SCALE, at least 1 s)")
	flag.DurationVar(&cfg.Tail, "tail", cfg.Tail, "how long a phase waits for jobs still in flight after its last insert")
	flag.IntVar(&cfg.Backlog, "backlog", cfg.Backlog, "jobs in the drained backlog (default: 100,000 × BENCH_SCALE)")
	flag.IntVar(&cfg.Workers, "workers", 1000, "River MaxWorkers of the queue")
	flag.DurationVar(&cfg.FetchCooldown, "fetch-cooldown", 5*time.Millisecond, "River FetchCooldown")
	flag.DurationVar(&cfg.FetchPollInterval, "fetch-poll-interval", 100*time.Millisecond, "River FetchPollInterval")
	flag.IntVar(&cfg.Conns, "conns", 32, "connections of the load generator")
	flag.BoolVar(&cfg.Slices, "slices", false, "read the latency phases from stdin, one slice per line (\"<rate> <duration>\"), "+
		"answer \"slice done\" on stdout after each, and report each rate over its slices at the end of stdin; -rates is ignored")
	flag.Parse()
	for _, r := range strings.FieldsFunc(*rates, func(c rune) bool { return c == ',' }) {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "river: bad rate %q\n", r)
			os.Exit(2)
		}
		cfg.Rates = append(cfg.Rates, n)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "river: %v\n", err)
		os.Exit(1)
	}
}
