package cdc

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// child is a relay running in a process of its own (the test binary with childEnv set), so
// that a test can kill it with SIGKILL.
type child struct {
	name     string
	cmd      *exec.Cmd
	leaderAt atomic.Pointer[time.Time] // when it logged "acquired leadership"
	exited   chan struct{}
	wg       sync.WaitGroup
}

func (h *harness) childConfig() childConfig {
	return childConfig{
		URL: h.url, Slot: h.cfg.Slot, Publication: h.cfg.Publication,
		Brokers: strings.Join(h.brokers, ","), Topics: h.cfg.Topics, EventsTopic: h.cfg.EventsTopic,
	}
}

func startChild(t testing.TB, name string, cc childConfig) *child {
	t.Helper()
	c := &child{name: name, exited: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = cc.env()
	stderr, err := c.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	c.wg.Go(func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, `"msg":"acquired leadership"`) {
				now := time.Now()
				c.leaderAt.Store(&now)
			}
			if strings.Contains(line, `"level":"error"`) || strings.Contains(line, `"level":"warn"`) {
				t.Logf("relay %s: %s", name, line)
			}
		}
		_ = c.cmd.Wait()
		close(c.exited)
	})
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		c.wg.Wait()
	})
	return c
}

func (c *child) leader() bool { return c.leaderAt.Load() != nil }

// kill ends the process with SIGKILL: no shutdown, no last status update, no Kafka flush.
func (c *child) kill(t testing.TB) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Kill())
	<-c.exited
}
