package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptrace"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// The seed-load generator in a process of its own (BENCH_LOAD_PROCESS, on by default): the
// benchmark binary starts itself again with loadChildEnv set, and that process sends the
// steady load and the burst, open loop as before, and reports each POST on stdout, one JSON
// object a line. In the benchmark's own process the generator's thousands of goroutines
// (a worker, and the HTTP client's reader and writer, per request in flight) share the Go
// scheduler with herald's handlers, so that an answer herald had written waited for the client
// goroutine's turn behind herald's own work, and herald's behind the generator's: that is a
// client in herald's process, which no deployment has. The child stays in the benchmark's
// session, so the kernel gives the two processes together the CPU share the one had.
const loadChildEnv = "BENCH_LOAD_CHILD"

// loadProcess says whether seed-load runs its generator in a process of its own:
// BENCH_LOAD_PROCESS=false keeps it in the benchmark's process, to compare side by side.
func loadProcess() bool {
	v, err := strconv.ParseBool(os.Getenv("BENCH_LOAD_PROCESS"))
	return err != nil || v
}

// loadLoop is one open loop of the generator: POST i is due at Start + i/Rate until End.
type loadLoop struct {
	Name      string // the Idempotency-Key prefix: "s" steady, "b" burst
	Start     time.Time
	End       time.Time
	Rate      float64
	Workers   int
	HighEvery int      // every HighEvery-th POST is HIGH (through the OTP client); 0: none
	Traces    []string // the HIGH POSTs' traceparents, in order
	Burst     bool     // through burstClient, a connection per worker
}

// loadChildConfig is what the generator process is told through loadChildEnv.
type loadChildConfig struct {
	URL, Key string
	HighURL  string // where HIGH POSTs go; "": URL
	Loops    []loadLoop
}

// loadLine is one POST the generator process sent (or could not send on time: Unsent).
type loadLine struct {
	Loop     string
	I        int
	Priority herald.Priority
	Due      time.Time
	Sent     time.Time
	Answered time.Time
	ID       string
	Refused  string
	Unsent   bool
	// From the client's trace (net/http/httptrace): whether the request went on a connection
	// opened for it, when its last byte was written, when the answer's first byte came.
	NewConn          bool
	Wrote, FirstByte time.Time
	Done             bool // the last line: every loop ended, Offered is each loop's count
	Offered          map[string]int
	// SchedP99 is, on the last line, the generator process's goroutine scheduling latency p99
	// (ms) over each loop's time: how long the client's goroutines waited, runnable, for a core.
	SchedP99 map[string]float64
}

// runLoadChild is the generator process: it runs every loop and exits.
func runLoadChild(raw string) int {
	var c loadChildConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintln(os.Stderr, "load generator:", err)
		return 2
	}
	s := &stack{url: c.URL, highURL: c.HighURL, key: c.Key}
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(l loadLine) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(l)
	}
	offered, schedP99 := map[string]int{}, map[string]float64{}
	sched := newSchedLatency()
	var wg sync.WaitGroup
	for _, lp := range c.Loops {
		wg.Add(2)
		go func() {
			defer wg.Done()
			n := runLoop(s, lp, emit)
			mu.Lock()
			offered[lp.Name] = n
			mu.Unlock()
		}()
		go func() { // the client's own waits for a core while the loop sends
			defer wg.Done()
			time.Sleep(time.Until(lp.Start))
			from := sched.snapshot()
			time.Sleep(time.Until(lp.End))
			p99, _ := quantileSince(from, sched.snapshot(), 0.99)
			mu.Lock()
			schedP99[lp.Name] = p99
			mu.Unlock()
		}()
	}
	wg.Wait()
	emit(loadLine{Done: true, Offered: offered, SchedP99: schedP99})
	return 0
}

// runLoop sends one loop's POSTs and reports each through emit; it returns how many fell due.
func runLoop(s *stack, lp loadLoop, emit func(loadLine)) int {
	ctx := context.Background()
	return openLoopPool(ctx, lp.Start, lp.Rate, lp.Workers, until(lp.End), func(i int, due time.Time) {
		prio, client := herald.PriorityNormal, loadClient
		var header map[string]string
		if lp.Burst {
			client = burstClient
		}
		if lp.HighEvery > 0 && i%lp.HighEvery == 0 {
			prio, client = herald.PriorityHigh, otpClient
			if n := i / lp.HighEvery; n < len(lp.Traces) {
				header = map[string]string{"traceparent": lp.Traces[n]}
			}
		}
		l := loadLine{Loop: lp.Name, I: i, Priority: prio, Due: due}
		tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GotConn:              func(c httptrace.GotConnInfo) { l.NewConn = !c.Reused },
			WroteRequest:         func(httptrace.WroteRequestInfo) { l.Wrote = time.Now() },
			GotFirstResponseByte: func() { l.FirstByte = time.Now() },
		})
		l.Sent = time.Now()
		l.ID, l.Refused = s.postWith(tctx, client, fmt.Sprintf("%s-%d", lp.Name, i), prio, header)
		l.Answered = time.Now()
		emit(l)
	}, func(i int, due time.Time) { emit(loadLine{Loop: lp.Name, I: i, Due: due, Unsent: true}) })
}

// startLoadChild starts the generator process and calls each for every line it reports, on
// one goroutine, until the process ends; it returns each loop's count of POSTs that fell due.
func startLoadChild(b *testing.B, c loadChildConfig, each func(loadLine)) (offered map[string]int, schedP99 map[string]float64) {
	b.Helper()
	raw, err := json.Marshal(c)
	heraldtest.Must(b, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), loadChildEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	heraldtest.Must(b, err)
	heraldtest.Must(b, cmd.Start())
	offered, schedP99 = readLoadLines(b, out, each)
	heraldtest.Must(b, cmd.Wait())
	return offered, schedP99
}

func readLoadLines(b *testing.B, out io.Reader, each func(loadLine)) (map[string]int, map[string]float64) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l loadLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			b.Errorf("load generator: %v in %q", err, sc.Text())
			continue
		}
		if l.Done {
			return l.Offered, l.SchedP99
		}
		each(l)
	}
	b.Errorf("load generator: output ended without its last line: %v", sc.Err())
	return nil, nil
}
