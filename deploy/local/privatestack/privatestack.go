// Package privatestack gives a test its own instance of a local-stack service (Kafka, Redis or
// PostgreSQL) that it may stop and start again: a failure test must not stop the shared stack
// that other tests use. It runs deploy/local/stack.sh with a private HERALD_STACK_DIR and
// private ports (below 32768, outside Linux's ephemeral range).
//
//	k := privatestack.Start(t, privatestack.Kafka)
//	// ... run the component against k.Addr ...
//	k.Down(t) // the broker goes away (controlled shutdown)
//	k.Up(t)   // and comes back, same address and data
//
// The instance is stopped and its folder removed when the test ends. A private Kafka costs a
// few seconds to start and HeapKafka of memory; keep such tests few.
//
// With the option Secured the instance also requires TLS and a password, as a production
// service would:
//
//	k := privatestack.Start(t, privatestack.Kafka, privatestack.Secured())
//	// k.SecureAddr: SASL_SSL (SCRAM-SHA-256/512 or PLAIN as k.User, k.Password; CA k.TLS.CAFile)
package privatestack

import (
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Service names a service of the local stack.
type Service string

// The services a private instance can run.
const (
	Kafka    Service = "kafka"
	Redis    Service = "redis"
	Postgres Service = "postgres"
)

// HeapKafka is the heap of a private broker.
const HeapKafka = "384m"

// Instance is one private service.
type Instance struct {
	Service Service
	// Dir is the instance's HERALD_STACK_DIR.
	Dir string
	// Addr is host:port of the service (the broker listener for Kafka).
	Addr string

	// Set by Secured: SecureAddr is the host:port that requires TLS (Kafka: SASL_SSL; Redis:
	// the TLS port; PostgreSQL: Addr, with ssl=on); TLS the CA and certificates; User and
	// Password the one account (Kafka SCRAM, Redis ACL; PostgreSQL keeps trust authentication).
	SecureAddr string
	TLS        TLSFiles
	User       string
	Password   string

	secured bool
	env     []string
}

// Option changes the instance Start makes.
type Option func(*Instance)

// Secured makes the instance require TLS, with a CA and certificates made for it (see
// TLSFiles), and a user name and password:
//   - Kafka: a second listener, SASL_SSL with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN, that requires a
//     client certificate; Addr stays PLAINTEXT (the readiness probe, inter-broker traffic).
//   - Redis: a TLS port that requires a client certificate; an ACL user on both ports (the
//     default user is off).
//   - PostgreSQL: ssl=on with the server certificate (clients may still connect without TLS;
//     sslmode decides).
func Secured() Option {
	return func(in *Instance) { in.secured = true }
}

// URL is the PostgreSQL admin URL of a Postgres instance (database postgres, user postgres).
func (in *Instance) URL() string {
	return "postgres://postgres@" + in.Addr + "/postgres?sslmode=disable"
}

// Start starts a private instance of s and registers its teardown with t.Cleanup.
func Start(t testing.TB, s Service, opts ...Option) *Instance {
	t.Helper()
	dir, err := os.MkdirTemp("", "herald-stack-")
	if err != nil {
		t.Fatalf("privatestack: temp dir: %v", err)
	}
	in := &Instance{Service: s, Dir: dir}
	for _, o := range opts {
		o(in)
	}
	in.env = append(os.Environ(), "HERALD_STACK_DIR="+dir)
	if os.Getenv("HERALD_KAFKA_READY_TIMEOUT") == "" {
		// A private broker starts (and restarts, waiting to be unfenced) while the rest of the
		// test suite loads both cores: give it longer than the shared stack's 90 s.
		in.env = append(in.env, "HERALD_KAFKA_READY_TIMEOUT=240")
	}
	switch s {
	case Kafka:
		ports := freePorts(t, 3)
		in.env = append(in.env,
			"HERALD_KAFKA_PORT="+strconv.Itoa(ports[0]),
			"HERALD_KAFKA_CONTROLLER_PORT="+strconv.Itoa(ports[1]),
			"HERALD_KAFKA_HEAP="+HeapKafka,
			"HERALD_STOP_TIMEOUT=30")
		in.Addr = "127.0.0.1:" + strconv.Itoa(ports[0])
		if in.secured {
			in.env = append(in.env, "HERALD_KAFKA_SECURE_PORT="+strconv.Itoa(ports[2]))
			in.SecureAddr = "127.0.0.1:" + strconv.Itoa(ports[2])
		}
	case Redis:
		ports := freePorts(t, 2)
		in.env = append(in.env, "HERALD_REDIS_PORT="+strconv.Itoa(ports[0]))
		in.Addr = "127.0.0.1:" + strconv.Itoa(ports[0])
		if in.secured {
			in.env = append(in.env, "HERALD_REDIS_TLS_PORT="+strconv.Itoa(ports[1]))
			in.SecureAddr = "127.0.0.1:" + strconv.Itoa(ports[1])
		}
	case Postgres:
		port := freePorts(t, 1)[0]
		in.env = append(in.env, "HERALD_PG_PORT="+strconv.Itoa(port))
		in.Addr = "127.0.0.1:" + strconv.Itoa(port)
		if in.secured {
			in.SecureAddr = in.Addr
		}
	default:
		t.Fatalf("privatestack: unknown service %q", s)
	}
	if in.secured {
		in.secure(t)
	}
	t.Cleanup(func() {
		if out, err := in.run("down", string(s)); err != nil {
			t.Errorf("privatestack: stop %s in %s: %v\n%s", s, dir, err, out)
			return
		}
		_ = os.RemoveAll(dir)
	})
	in.Up(t)
	return in
}

// secure makes the instance's certificates and account and hands them to stack.sh.
func (in *Instance) secure(t testing.TB) {
	t.Helper()
	tlsDir := filepath.Join(in.Dir, "tls")
	if err := os.Mkdir(tlsDir, 0o700); err != nil {
		t.Fatalf("privatestack: %v", err)
	}
	in.TLS = NewTLSFiles(t, tlsDir)
	in.User, in.Password = "herald", rand.Text()
	in.env = append(in.env,
		"HERALD_STACK_TLS_CERT_FILE="+in.TLS.CertFile,
		"HERALD_STACK_TLS_KEY_FILE="+in.TLS.KeyFile)
	if in.Service != Postgres {
		in.env = append(in.env,
			"HERALD_STACK_TLS_CA_FILE="+in.TLS.CAFile,
			"HERALD_STACK_USER="+in.User,
			"HERALD_STACK_PASSWORD="+in.Password)
	}
}

// Up starts the instance again after Down (a no-op when it runs) and waits until it is ready.
func (in *Instance) Up(t testing.TB) {
	t.Helper()
	if out, err := in.run("up", string(in.Service)); err != nil {
		t.Fatalf("privatestack: start %s in %s: %v\n%s", in.Service, in.Dir, err, out)
	}
}

// Down stops the instance: SIGTERM (Kafka: controlled shutdown; PostgreSQL: fast shutdown),
// SIGKILL after a timeout. Its data stays for the next Up.
func (in *Instance) Down(t testing.TB) {
	t.Helper()
	if out, err := in.run("down", string(in.Service)); err != nil {
		t.Fatalf("privatestack: stop %s in %s: %v\n%s", in.Service, in.Dir, err, out)
	}
}

// Pid is the process id of the running service (e.g. to SIGSTOP a broker and simulate a hang).
func (in *Instance) Pid(t testing.TB) int {
	t.Helper()
	file := filepath.Join(in.Dir, string(in.Service), string(in.Service)+".pid")
	if in.Service == Postgres {
		file = filepath.Join(in.Dir, "postgres", "data", "postmaster.pid")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("privatestack: pid of %s: %v", in.Service, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		t.Fatalf("privatestack: pid of %s in %s: %v", in.Service, file, err)
	}
	return pid
}

func (in *Instance) run(args ...string) ([]byte, error) {
	cmd := exec.Command("bash", append([]string{script()}, args...)...)
	cmd.Env = in.env
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// script is deploy/local/stack.sh, found next to this source file.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "stack.sh")
}

var portsMu sync.Mutex

// freePorts picks n ports in [20000, 32000) that nothing listens on now. Ports below 32768
// cannot be taken meanwhile by a socket bound to port 0 (an ephemeral port).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			t.Fatalf("privatestack: no free port in [20000, 32000)")
		}
		p := 20000 + mrand.IntN(12000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		_ = l.Close()
		dup := false
		for _, q := range ports {
			dup = dup || q == p
		}
		if !dup {
			ports = append(ports, p)
		}
	}
	return ports
}
