package dispatch

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

// childEnv makes the test binary run as a dispatch worker whose provider call never returns
// (see runChild), so that a test can kill it mid-send.
const childEnv = "HERALD_DISPATCH_TEST_CHILD"

type childSpec struct {
	DSN       string
	RedisAddr string
	Prefix    string
	Brokers   []string
	Lanes     map[herald.Priority]LaneConfig
}

// runChild is the worker process: it prints "CALL <delivery id>" when its sender is called
// and then hangs in the call until it is killed (or two minutes pass).
func runChild() int {
	var spec childSpec
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "child spec:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, spec.DSN)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child pool:", err)
		return 2
	}
	defer pool.Close()
	rdb := redis.NewClient(&redis.Options{Addr: spec.RedisAddr})
	defer rdb.Close()
	s := &MemorySender{
		OnCall: func(m *senders.Message) { fmt.Printf("CALL %s\n", m.DeliveryID) },
		Behave: func(ctx context.Context, _ *senders.Message, _ int) (senders.Result, error) {
			<-ctx.Done()
			return senders.Result{}, ctx.Err()
		},
	}
	// A short session lets the group drop the killed member quickly (the broker's minimum).
	cfg := Config{Brokers: spec.Brokers, Lanes: spec.Lanes, RedisPrefix: spec.Prefix, SendTimeout: time.Minute,
		ClientOptions: []kgo.Opt{kgo.SessionTimeout(6 * time.Second)}}
	d, err := New(cfg, pool, rdb, smsOnly(s), zap.NewNop())
	if err != nil {
		fmt.Fprintln(os.Stderr, "child dispatcher:", err)
		return 2
	}
	if err := d.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child run:", err)
		return 1
	}
	return 0
}

// A worker process killed (SIGKILL) while its provider call is in flight: the row stays
// SENDING until the reaper returns it to PENDING with an AMBIGUOUS attempt, and another
// worker then finishes the delivery. The kill can cost one duplicate provider call (the
// killed call may have reached the provider); the test prints how many it caused.
func TestWorkerKilledMidSend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.config()
	id := e.insert(fixture{})

	spec, err := json.Marshal(childSpec{DSN: e.dsn, RedisAddr: e.rdb.Options().Addr, Prefix: e.prefix,
		Brokers: e.brokers, Lanes: cfg.Lanes})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	calls := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "CALL "); ok {
				calls <- rest
			}
		}
		close(calls)
	}()

	e.publish(id)
	select {
	case got := <-calls:
		require.Equal(t, id, got)
	case <-time.After(60 * time.Second):
		t.Fatal("the child worker never called its sender")
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	exited = true
	childCalls := 1
	for range calls {
		childCalls++
	}

	st, n := e.state(id)
	require.Equal(t, herald.StatusSending, st, "a killed worker leaves its claim behind")
	require.Equal(t, 1, n)
	require.Equal(t, 1, e.reap())

	s := &MemorySender{}
	e.start(cfg, nil, smsOnly(s)) // same groups: the uncommitted record comes back too
	e.sweep()
	e.waitStatus(60*time.Second, []herald.Status{herald.StatusSent, herald.StatusFailed}, id)
	st, n = e.state(id)
	require.Equal(t, herald.StatusSent, st)
	require.Equal(t, 2, n)
	as := e.attempts(id)
	require.Len(t, as, 2)
	require.Equal(t, "AMBIGUOUS", as[0].Outcome)
	require.Equal(t, "SENT", as[1].Outcome)
	require.Equal(t, 1, s.CallCount(id))
	fmt.Printf("TestWorkerKilledMidSend: provider calls %d (killed worker %d, survivor %d): %d duplicate send(s) caused by the kill\n",
		childCalls+s.CallCount(id), childCalls, s.CallCount(id), childCalls+s.CallCount(id)-1)
}
