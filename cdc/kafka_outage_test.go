package cdc

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// privateKafka is a broker of this test's own, started by deploy/local/stack.sh with its own
// state folder and ports, so that the test can stop it without touching the shared one.
type privateKafka struct {
	addr string
	env  []string
}

func startPrivateKafka(t *testing.T) *privateKafka {
	t.Helper()
	port, controller := freePort(t), freePort(t)
	k := &privateKafka{
		addr: fmt.Sprintf("127.0.0.1:%d", port),
		env: append(os.Environ(),
			"HERALD_STACK_DIR="+t.TempDir(),
			fmt.Sprintf("HERALD_KAFKA_PORT=%d", port),
			fmt.Sprintf("HERALD_KAFKA_CONTROLLER_PORT=%d", controller),
			"HERALD_KAFKA_HEAP=512m",
		),
	}
	k.stack(t, "up", "kafka")
	t.Cleanup(func() { k.stack(t, "down", "kafka") })
	return k
}

func (k *privateKafka) stack(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("../deploy/local/stack.sh", args...)
	cmd.Env = k.env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "stack.sh %v: %s", args, out)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestKafkaStoppedForTenSecondsLosesNothing(t *testing.T) {
	t.Parallel()
	k := startPrivateKafka(t)
	h := newHarness(t, []string{k.addr})
	cfg := h.cfg
	cfg.MaxInFlight = 1000 // reached during the outage: the stream must stop reading, not fail
	h.startRelay(cfg)

	warm := h.insert(rows{n: 10})
	h.waitAll(warm, 60*time.Second)

	in := h.startInserter(10, 0, 10*time.Millisecond)
	k.stack(t, "down", "kafka")
	before := in.count()
	// The outage itself is the scenario: rows keep arriving for 10 s while Kafka is away.
	outage := time.NewTimer(10 * time.Second)
	<-outage.C
	during := in.snapshot()[before:]
	require.NotEmpty(t, during)
	queued := h.queryString(`SELECT count(*)::text FROM delivery WHERE id::text = ANY($1) AND status = 'QUEUED'`, during)
	require.Equal(t, "0", queued, "rows marked QUEUED while Kafka was down")
	k.stack(t, "up", "kafka")

	after := in.count()
	eventually(t, 30*time.Second, func() bool { return in.count() >= after+100 }, "inserts stalled")
	ids := in.stop()
	t.Logf("%d rows inserted, %d of them while Kafka was down", len(ids), len(during))
	h.waitAll(ids, 180*time.Second)
	t.Logf("every row reached Kafka once it was back; duplicates: %d", h.records.duplicates(ids))
	require.Empty(t, h.records.malformed())
}
