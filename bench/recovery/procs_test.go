package recovery

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldhq/herald/internal/stacktest"
	"github.com/heraldhq/herald/senders/sim"
)

// The helpers below run herald as an operator does: the binary, built once, as separate
// processes with flags and environment. They are a small copy of cmd/herald's test
// harness (unexported there), trimmed to what this scenario needs.

// buildHerald builds cmd/herald into a temporary directory and returns the binary's path.
func buildHerald(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "herald")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/heraldhq/herald/cmd/herald").CombinedOutput()
	if err != nil {
		b.Fatalf("go build ./cmd/herald: %v\n%s", err, out)
	}
	return bin
}

// proc is a herald subprocess whose output goes to a log file, shown when the run fails.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// start runs bin with args and env (on top of the environment without its HERALD_*
// variables). The process is stopped (SIGTERM, then SIGKILL) when the benchmark ends.
func start(b *testing.B, bin, name string, env map[string]string, args ...string) *proc {
	b.Helper()
	logPath := filepath.Join(b.TempDir(), name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERALD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		b.Fatalf("start herald %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	b.Cleanup(func() {
		p.stop()
		if b.Failed() {
			p.dump(b)
		}
	})
	return p
}

// stop asks for a graceful stop and kills after 15 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.kill()
	}
}

// kill is kill -9; it returns once the process is gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) dump(b *testing.B) {
	data, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	b.Logf("--- herald %s log (last %d lines) ---\n%s", p.name, len(lines), strings.Join(lines, "\n"))
}

func freeAddr(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// startSim runs `herald sim` and returns the environment that points serve at it and its
// control URL.
func startSim(b *testing.B, bin string, extra ...string) (env map[string]string, url string) {
	b.Helper()
	dir := b.TempDir()
	p := start(b, bin, "sim", nil, append([]string{"sim", "--sim-dir", dir, "--sim-http-addr", "127.0.0.1:0",
		"--sim-tls-addr", "127.0.0.1:0", "--sim-smtp-addr", "127.0.0.1:0"}, extra...)...)
	waitFor(b, 30*time.Second, "herald sim to write its env file", func() bool {
		if p.exited() {
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
	var all []sim.Record
	var since int64
	for {
		var page struct {
			Records []sim.Record `json:"records"`
			Next    int64        `json:"next"`
			Dropped int64        `json:"dropped"`
		}
		getJSON(b, fmt.Sprintf("%s/records?since=%d&limit=10000", url, since), &page)
		if page.Dropped > 0 {
			b.Fatalf("the simulator dropped %d records", page.Dropped)
		}
		if len(page.Records) == 0 {
			return all
		}
		all = append(all, page.Records...)
		since = page.Next
	}
}

func getJSON(b *testing.B, url string, out any) {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s: %s", url, resp.Status, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		b.Fatalf("GET %s: %v", url, err)
	}
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
func serve(b *testing.B, bin, name, addr string, env map[string]string, args ...string) *proc {
	b.Helper()
	p := start(b, bin, name, env, append([]string{"serve", "--http-addr", addr}, args...)...)
	waitFor(b, 60*time.Second, "herald "+name+" to be ready", func() bool {
		if p.exited() {
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

func waitFor(b *testing.B, d time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
