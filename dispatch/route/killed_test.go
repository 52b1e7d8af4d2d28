package route

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/dispatch"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/senders"
)

// childEnv makes the test binary run as a dispatcher whose primary account is down and whose
// standby takes 20 ms a call and prints "CALL <delivery id>" for each (see runChild).
const childEnv = "HERALD_ROUTE_TEST_CHILD"

type childSpec struct {
	DSN       string
	RedisAddr string
	Prefix    string
	Brokers   []string
	Lanes     map[herald.Priority]dispatch.LaneConfig
}

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
	out := &outage{}
	out.down.Store(true)
	var mu sync.Mutex
	primary := &dispatch.MemorySender{ProviderName: "sms:twilio", Behave: out.behave}
	standby := &dispatch.MemorySender{ProviderName: "sms:vonage", Latency: 20 * time.Millisecond,
		OnCall: func(m *senders.Message) {
			mu.Lock()
			fmt.Printf("CALL %s\n", m.DeliveryID)
			mu.Unlock()
		}}
	cfg := fast()
	cfg.RedisPrefix = spec.Prefix
	r, err := New(cfg, rdb, map[herald.Channel][]Account{herald.ChannelSMS: {
		{Sender: primary, Weight: 100}, {Sender: standby, Weight: 0}}}, zap.NewNop())
	if err != nil {
		fmt.Fprintln(os.Stderr, "child router:", err)
		return 2
	}
	defer r.Close()
	d, err := dispatch.New(dispatch.Config{Brokers: spec.Brokers, Lanes: spec.Lanes, RedisPrefix: spec.Prefix,
		RetryPolicies: map[herald.Channel]dispatch.RetryPolicy{
			herald.ChannelSMS: {Base: 100 * time.Millisecond, Max: 500 * time.Millisecond, MaxAttempts: 20}},
		CommitInterval: 50 * time.Millisecond, ClientOptions: []kgo.Opt{kgo.SessionTimeout(6 * time.Second)}},
		pool, rdb, r.Senders(nil), zap.NewNop())
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

// kill -9 of a dispatcher in the middle of a failover (its primary down, HIGH moving to the
// standby): nothing is lost. Another dispatcher on the same groups and Redis takes the
// partitions, the reaper returns the killed process's claims, and every delivery ends SENT
// on the standby; the duplicates the kill caused are printed and bounded by the killed
// process's HIGH concurrency.
func TestKilledDispatcherDuringFailover(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	spec, err := json.Marshal(childSpec{DSN: s.dsn, RedisAddr: s.rdb.Options().Addr, Prefix: s.prefix,
		Brokers: s.brokers, Lanes: s.lanes})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	var mu sync.Mutex
	childCalls := map[string]int{}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "CALL "); ok {
				mu.Lock()
				childCalls[id]++
				mu.Unlock()
			}
		}
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(childCalls)
	}

	ids := s.insert(300, herald.PriorityHigh)
	heraldtest.WaitForEvery(t, 60*time.Second, 2*time.Millisecond, "the child to send 30 deliveries on the standby", func() bool { return count() >= 30 })
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	exited = true
	<-read
	killedAt := count()
	final, _ := s.finished(ids)
	require.Less(t, final, len(ids), "killed before the end")

	out := &outage{}
	out.down.Store(true)
	primary := &dispatch.MemorySender{ProviderName: "sms:twilio", Behave: out.behave}
	standby := &dispatch.MemorySender{ProviderName: "sms:vonage"}
	s.dispatch(s.dispatchConfig(nil), s.route(fast(), primary, standby))
	s.waitSent(90*time.Second, ids)

	dups := 0
	for _, id := range ids {
		as := s.attempts(id)
		last := as[len(as)-1]
		require.Equal(t, "SENT", last.Outcome)
		require.Equal(t, "sms:vonage", last.Provider, id)
		n := childCalls[id] + standby.CallCount(id)
		require.GreaterOrEqual(t, n, 1)
		dups += n - 1
	}
	fmt.Printf("TestKilledDispatcherDuringFailover: killed after %d standby calls, %d finished then; %d duplicate standby calls caused by the kill\n",
		killedAt, final, dups)
	require.LessOrEqual(t, dups, dispatch.DefaultLanes[herald.PriorityHigh].Concurrency)
}
