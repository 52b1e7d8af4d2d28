// Package stacktest gives integration tests their own slice of the local stack that
// deploy/local starts: a fresh, migrated PostgreSQL database per test, unique Kafka topic
// names and a unique Redis key prefix, so that tests run in parallel without seeing each
// other.
//
// A missing service is a test failure, never a skip: `make test` starts the stack and exports
// the addresses below.
package stacktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/migrate"
	"github.com/heraldhq/herald/internal/pgpool"
)

// Environment variables set by `make test` (see `deploy/local/stack.sh env`).
const (
	EnvPostgres = "HERALD_TEST_POSTGRES_URL" // admin URL of the cluster, e.g. postgres://postgres@127.0.0.1:55432/postgres
	EnvKafka    = "HERALD_TEST_KAFKA_BROKERS"
	EnvRedis    = "HERALD_TEST_REDIS_ADDR"
)

func require(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: integration tests need the local stack; run them with `make test`", name)
	}
	return v
}

// Name returns a short random name with the given prefix, usable as a database, slot, topic
// or key prefix: lower case letters, digits and underscores.
func Name(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// PostgresURL creates a fresh database with every migration applied and returns its URL.
// The database, and any replication slot on it, is dropped when the test ends.
func PostgresURL(t testing.TB) string {
	t.Helper()
	return PostgresURLAt(t, -1)
}

// PostgresURLAt is PostgresURL with the migrations applied up to and including version
// only (-1: all), for tests of a migration on a database an earlier herald left.
func PostgresURLAt(t testing.TB, version int64) string {
	t.Helper()
	admin := require(t, EnvPostgres)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to PostgreSQL at %s: %v", admin, err)
	}
	defer conn.Close(ctx)
	db := Name("herald_test")
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatalf("create database %s: %v", db, err)
	}
	t.Cleanup(func() { dropDatabase(t, admin, db) })

	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvPostgres, err)
	}
	u.Path = "/" + db
	dsn := u.String()

	pool, err := pgpool.New(ctx, dsn, 0)
	if err != nil {
		t.Fatalf("open %s: %v", db, err)
	}
	defer pool.Close()
	if version < 0 {
		_, err = migrate.Up(ctx, pool)
	} else {
		_, err = migrate.UpTo(ctx, pool, version)
	}
	if err != nil {
		t.Fatalf("migrate %s: %v", db, err)
	}
	return dsn
}

// VersionBefore returns the highest migration version below v: the schema an earlier herald
// left, for a test of migration v.
func VersionBefore(t testing.TB, v int64) int64 {
	t.Helper()
	names, err := fs.Glob(herald.Migrations(), "*.sql")
	if err != nil {
		t.Fatalf("list migrations: %v", err)
	}
	var best int64 = -1
	for _, n := range names {
		num, _, _ := strings.Cut(n, "_")
		ver, err := strconv.ParseInt(num, 10, 64)
		if err == nil && ver < v && ver > best {
			best = ver
		}
	}
	if best < 0 {
		t.Fatalf("no migration before %d", v)
	}
	return best
}

// Postgres returns a pool on a fresh, migrated database (see PostgresURL).
func Postgres(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgpool.New(context.Background(), PostgresURL(t), 0)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func dropDatabase(t testing.TB, admin, db string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Errorf("drop database %s: %v", db, err)
		return
	}
	defer conn.Close(ctx)
	// Slots pin WAL for the whole cluster: drop them with the database. An active slot is
	// ended first by terminating its walsender.
	_, _ = conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
		WHERE database = $1 AND active_pid IS NOT NULL`, db)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
			WHERE database = $1`, db)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("drop replication slots of %s: %v", db, err)
	}
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
		t.Errorf("drop database %s: %v", db, err)
	}
}

// KafkaBrokers returns the seed brokers of the local Kafka.
func KafkaBrokers(t testing.TB) []string {
	t.Helper()
	return strings.Split(require(t, EnvKafka), ",")
}

// KafkaTopics creates topics with the given partition counts, each named <unique>.<short
// name>, and returns the full name by short name. They are deleted when the test ends.
func KafkaTopics(t testing.TB, partitions map[string]int32) map[string]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(KafkaBrokers(t)...))
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	adm := kadm.NewClient(cl)
	t.Cleanup(cl.Close)
	prefix := Name("t")
	names := make(map[string]string, len(partitions))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for short, n := range partitions {
		full := prefix + "." + short
		names[short] = full
		resp, err := adm.CreateTopic(ctx, n, 1, nil, full)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create topic %s: %v", full, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		all := make([]string, 0, len(names))
		for _, n := range names {
			all = append(all, n)
		}
		_, _ = adm.DeleteTopics(ctx, all...)
	})
	return names
}

// Redis returns a client on the local Redis and a unique key prefix for this test. Keys
// under the prefix are deleted when the test ends.
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: require(t, EnvRedis)})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping Redis at %s: %v", rdb.Options().Addr, err)
	}
	prefix := Name("t") + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		_ = rdb.Close()
	})
	return rdb, prefix
}
