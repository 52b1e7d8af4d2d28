package privatestack

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Each test proves the point of the package: the service answers, is really gone after Down
// (while the shared stack keeps running), and answers again after Up with its data kept.

func TestRedisDownUp(t *testing.T) {
	t.Parallel()
	in := Start(t, Redis)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: in.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()

	require.NoError(t, rdb.Ping(ctx).Err())
	in.Down(t)
	require.Error(t, rdb.Ping(ctx).Err(), "redis still answers after Down")
	in.Up(t)
	require.NoError(t, rdb.Ping(ctx).Err())
}

func TestPostgresDownUp(t *testing.T) {
	t.Parallel()
	in := Start(t, Postgres)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	query := func() (string, error) {
		conn, err := pgx.Connect(ctx, in.URL())
		if err != nil {
			return "", err
		}
		defer conn.Close(ctx)
		var wal string
		err = conn.QueryRow(ctx, "SHOW wal_level").Scan(&wal)
		return wal, err
	}
	wal, err := query()
	require.NoError(t, err)
	require.Equal(t, "logical", wal)

	in.Down(t)
	_, err = query()
	require.Error(t, err, "postgres still answers after Down")
	in.Up(t)
	wal, err = query()
	require.NoError(t, err)
	require.Equal(t, "logical", wal)
}

func TestKafkaDownUp(t *testing.T) {
	t.Parallel()
	in := Start(t, Kafka)
	// Each call gets its own deadline: a start or restart under a loaded suite can take
	// minutes (privatestack waits for it), which one deadline over the whole test would
	// count against the calls.
	topics := func() (kadm.TopicDetails, error) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(in.Addr), kgo.RequestRetries(0),
			kgo.DialTimeout(time.Second))
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		rctx, rcancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer rcancel()
		return kadm.NewClient(cl).ListTopics(rctx)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(in.Addr))
	require.NoError(t, err)
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "private_stack_probe")
	cl.Close()
	require.NoError(t, err)

	in.Down(t)
	_, err = topics()
	require.Error(t, err, "kafka still answers after Down")

	in.Up(t)
	got, err := topics()
	require.NoError(t, err)
	require.True(t, got.Has("private_stack_probe"), "the topic did not survive the restart: %v", got.Names())
	requireKafkaPriority(t, in)
}

// requireKafkaPriority checks that a broker started by stack.sh runs at HERALD_KAFKA_NICE
// (default -10; root only, as a negative nice needs it), its session's scheduling group and
// every thread, and that it logs its GC pauses.
func requireKafkaPriority(t *testing.T, in *Instance) {
	t.Helper()
	want := -10
	if v := os.Getenv("HERALD_KAFKA_NICE"); v != "" {
		var err error
		want, err = strconv.Atoi(v)
		require.NoError(t, err)
	}
	if os.Geteuid() != 0 && want < 0 {
		want = 0 // stack.sh cannot raise a priority without root; it says so and goes on
	}
	pid := in.Pid(t)
	group, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "autogroup"))
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(strings.TrimSpace(string(group)), " nice "+strconv.Itoa(want)),
		"the broker's scheduling group: %q, want nice %d", group, want)
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	require.NoError(t, err)
	for _, task := range tasks {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", task.Name(), "stat"))
		require.NoError(t, err)
		// The fields after the command name (which is in parentheses): nice is the 17th.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		require.Equal(t, strconv.Itoa(want), fields[16], "thread %s of the broker", task.Name())
	}
	gc, err := os.ReadFile(filepath.Join(in.Dir, "kafka", "gc.log"))
	require.NoError(t, err)
	require.Contains(t, string(gc), "Using G1")
}
