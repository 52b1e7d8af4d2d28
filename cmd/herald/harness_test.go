package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/openapitest"
	"github.com/heraldhq/herald/internal/stacktest"
	"github.com/heraldhq/herald/senders/sim"
)

// proc is a herald subprocess whose output goes to a log file, shown when the test fails.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// start runs the herald binary with args and env (on top of the environment without its
// HERALD_* variables, so that nothing of the developer's shell leaks in).
func start(t *testing.T, name string, env map[string]string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	out, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(heraldBin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERALD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start(), "start herald %s", name)
	p := &proc{t: t, name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			p.dump()
		}
	})
	return p
}

// stop asks for a graceful stop (SIGTERM) and kills after 15 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.t.Errorf("herald %s did not stop within 15s of SIGTERM; killing it", p.name)
		p.kill()
	}
}

// kill is kill -9.
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

// dump prints the last lines of the process's log.
func (p *proc) dump() {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	p.t.Logf("--- herald %s log (last %d lines) ---\n%s", p.name, len(lines), strings.Join(lines, "\n"))
}

// simulator is a running `herald sim` and the environment that points serve at it.
type simulator struct {
	*proc
	env map[string]string
	url string
}

func startSim(t *testing.T, extra ...string) *simulator {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"sim", "--sim-dir", dir, "--sim-http-addr", "127.0.0.1:0",
		"--sim-tls-addr", "127.0.0.1:0", "--sim-smtp-addr", "127.0.0.1:0"}, extra...)
	p := start(t, "sim", nil, args...)
	envPath := filepath.Join(dir, simEnvFile)
	var env map[string]string
	heraldtest.WaitFor(t, 30*time.Second, "herald sim to write "+simEnvFile, func() bool {
		if p.exited() {
			t.Fatal("herald sim exited")
		}
		b, err := os.ReadFile(envPath)
		if err != nil {
			return false
		}
		env = parseEnvFile(b)
		return true
	})
	s := &simulator{proc: p, env: env, url: env["HERALD_SIM_URL"]}
	require.NotEmpty(t, s.url)
	return s
}

// parseEnvFile reads what writeEnvFile wrote.
func parseEnvFile(b []byte) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "export ") {
			continue
		}
		k, v, _ := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		env[k] = strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'"), `'\''`, "'")
	}
	return env
}

func (s *simulator) setFaults(t *testing.T, provider string, f string) {
	t.Helper()
	doJSON(t, http.MethodPut, s.url+"/faults/"+provider, "", f, nil, http.StatusNoContent)
}

func (s *simulator) stats(t *testing.T) map[string]sim.Stats {
	t.Helper()
	var out map[string]sim.Stats
	doJSON(t, http.MethodGet, s.url+"/stats", "", "", &out, http.StatusOK)
	return out
}

// records returns every record of the simulator.
func (s *simulator) records(t *testing.T) []sim.Record {
	t.Helper()
	recs, err := sim.FetchRecords(t.Context(), s.url)
	require.NoError(t, err)
	return recs
}

// stack is one test's slice of the local stack: a database, topics, names, Redis prefix.
type stack struct {
	dsn  string
	args []string // serve flags naming the test's own database, topics, slot, groups
}

func newStack(t *testing.T) *stack {
	t.Helper()
	dsn := stacktest.PostgresURL(t)
	topics := stacktest.KafkaTopics(t, map[string]int32{"high": 4, "normal": 4, "low": 2})
	_, prefix := stacktest.Redis(t)
	g := stacktest.Name("e2e")
	args := []string{
		"--database-url", dsn, "--database-max-conns", "24",
		"--kafka-brokers", strings.Join(stacktest.KafkaBrokers(t), ","),
		"--redis-addr", os.Getenv(stacktest.EnvRedis), "--redis-prefix", prefix,
		"--relay-slot", g, "--relay-publication", g + "_pub",
		"--kafka-session-timeout", "6s",
		"--log-format", "json", "--shutdown-timeout", "5s",
		"--admin-addr", "", // tests run in parallel: each that wants the admin listener names its own
	}
	for _, p := range []string{"high", "normal", "low"} {
		args = append(args, "--topic-"+p, topics[p], "--dispatch-group-"+p, g+"_"+p)
	}
	args = append(args, "--partitions-high", "4", "--partitions-normal", "4", "--partitions-low", "2")
	// The status events of the test's transitions go to a topic of its own.
	args = append(args, "--events-topic", stacktest.KafkaTopics(t, map[string]int32{"events": 2})["events"], "--events-partitions", "2")
	return &stack{dsn: dsn, args: args}
}

var apiKeyLine = regexp.MustCompile(`(?m)^api key:\s+(hk_\S+)`)

// apiKey creates an API client with every scope with `herald apikey create`.
func (s *stack) apiKey(t *testing.T) string {
	key, _ := s.apiClient(t)
	return key
}

// apiClient is apiKey that also returns the client's webhook signing secret.
func (s *stack) apiClient(t *testing.T) (key, webhookSecret string) {
	t.Helper()
	cmd := exec.Command(heraldBin, "apikey", "create", "--name", "e2e", "--scopes", "operator", "--database-url", s.dsn)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "herald apikey create: %s", out)
	m := apiKeyLine.FindSubmatch(out)
	require.NotNil(t, m, "no api key in %q", out)
	sec := secretLine.FindSubmatch(out)
	require.NotNil(t, sec, "no webhook secret in %q", out)
	return string(m[1]), string(sec[1])
}

// serve starts `herald serve` with the stack's flags, the simulator's environment and extra
// flags, and waits until its API is ready.
func (s *stack) serve(t *testing.T, name, addr string, sm *simulator, extra ...string) *proc {
	t.Helper()
	args := append(append([]string{"serve", "--http-addr", addr}, s.args...), extra...)
	p := start(t, name, sm.env, args...)
	heraldtest.WaitFor(t, 60*time.Second, "herald serve to be ready", func() bool {
		if p.exited() {
			t.Fatalf("herald %s exited", name)
		}
		status, _, err := tryJSON(context.Background(), http.MethodGet, "http://"+addr+"/readyz", "", "", "")
		return err == nil && status == http.StatusOK
	})
	return p
}

// httpClient checks every exchange with an operation of docs/openapi.yaml against it; a
// departure fails the run (TestMain), since tryJSON has no test to fail.
var httpClient = &http.Client{Timeout: 20 * time.Second, Transport: openapitest.Transport(http.DefaultTransport, breaches.add)}

// breaches collects the exchanges that departed from docs/openapi.yaml.
var breaches contractBreaches

type contractBreaches struct {
	mu   sync.Mutex
	msgs []string
}

func (b *contractBreaches) add(msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.msgs = append(b.msgs, msg)
}

func (b *contractBreaches) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.msgs)
}

// doJSON sends body (JSON, may be empty) and decodes the answer into out (may be nil).
func doJSON(t *testing.T, method, url, key, body string, out any, want ...int) int {
	t.Helper()
	status, b, err := tryJSON(context.Background(), method, url, key, "", body)
	require.NoError(t, err, "%s %s", method, url)
	if len(want) > 0 {
		require.Contains(t, want, status, "%s %s: %s", method, url, b)
	}
	if out != nil {
		require.NoError(t, json.Unmarshal(b, out), "%s %s: %s", method, url, b)
	}
	return status
}

func tryJSON(ctx context.Context, method, url, key, idem, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
