package dispatch

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// privateRedis is a redis-server owned by one test, on a free port, so that the test can
// stop and restart it without touching the shared one.
type privateRedis struct {
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
}

func startPrivateRedis(t testing.TB) *privateRedis {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	r := &privateRedis{t: t, port: port, dir: t.TempDir()}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *privateRedis) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func (r *privateRedis) start() {
	r.t.Helper()
	r.cmd = exec.Command("redis-server", "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir)
	require.NoError(r.t, r.cmd.Start())
	c := redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1})
	defer c.Close()
	require.Eventually(r.t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return c.Ping(ctx).Err() == nil
	}, 10*time.Second, 10*time.Millisecond, "private redis did not come up")
}

// stop kills the server; its data is gone (no persistence), as after a crash.
func (r *privateRedis) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// client returns a client that fails fast while the server is down.
func (r *privateRedis) client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	r.t.Cleanup(func() { _ = c.Close() })
	return c
}
