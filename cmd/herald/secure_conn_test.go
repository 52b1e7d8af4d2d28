package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/heraldhq/herald/deploy/local/privatestack"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// The secure-connection tests run herald's Kafka, Redis and PostgreSQL settings against
// private instances that require TLS (certificates of a CA made by the test) and a password,
// as production services do.

// serveFlags parses serve's flags (and HERALD_* variables) as `herald serve` does.
func serveFlags(t *testing.T, args ...string) serveConfig {
	t.Helper()
	var c serveConfig
	f := newFlags("serve")
	c.register(f)
	f.SetOutput(io.Discard)
	require.NoError(t, f.Parse(args))
	return c
}

// secretFile writes secret (with the newline an editor adds) to a 0600 file.
func secretFile(t *testing.T, secret string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "password")
	require.NoError(t, os.WriteFile(file, []byte(secret+"\n"), 0o600))
	return file
}

// kafkaFlags are the flags of a client of k with its client certificate and SCRAM-SHA-512,
// without the password.
func kafkaFlags(k *privatestack.Instance) []string {
	return []string{"--kafka-brokers", k.SecureAddr,
		"--kafka-tls-ca-file", k.TLS.CAFile, "--kafka-tls-cert-file", k.TLS.ClientCertFile, "--kafka-tls-key-file", k.TLS.ClientKeyFile,
		"--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-username", k.User}
}

// listBrokers is one metadata round trip with c's Kafka options, no retries.
func listBrokers(t *testing.T, c serveConfig) error {
	t.Helper()
	opts, err := c.Kafka.options(c.KafkaBrokers)
	require.NoError(t, err)
	cl, err := kgo.NewClient(append(opts, kgo.RequestRetries(0), kgo.RetryTimeout(5*time.Second), kgo.DialTimeout(3*time.Second))...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).ListBrokers(ctx)
	return err
}

// TestSecureKafka starts one private broker with a SASL_SSL listener (SCRAM-SHA-256/512 and
// PLAIN, client certificates required) and a private Redis with TLS and an ACL user, shared by
// the subtests.
func TestSecureKafka(t *testing.T) {
	t.Parallel()
	k := privatestack.Start(t, privatestack.Kafka, privatestack.Secured())
	r := privatestack.Start(t, privatestack.Redis, privatestack.Secured())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("the relay's and dispatch's options produce and consume", func(t *testing.T) {
		c := serveFlags(t, append(kafkaFlags(k), "--kafka-sasl-password-file", secretFile(t, k.Password))...)
		topic := stacktest.Name("secure")

		// As newRelay builds the relay's client: it also creates the topics (kadm).
		opts, err := c.Kafka.options(c.KafkaBrokers)
		require.NoError(t, err)
		producer, err := kgo.NewClient(append(opts, kgo.ProducerLinger(0))...)
		require.NoError(t, err)
		defer producer.Close()
		_, err = kadm.NewClient(producer).CreateTopic(ctx, 1, 1, nil, topic)
		require.NoError(t, err)
		require.NoError(t, producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("hello")}).FirstErr())

		// As newDispatcher configures every lane's consumer.
		dc, err := c.Dispatch.config(c.Topics, c.KafkaBrokers, c.ShutdownTimeout)
		require.NoError(t, err)
		require.NoError(t, c.Kafka.applyDispatch(&dc))
		consumer, err := kgo.NewClient(append(dc.ClientOptions, kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		require.NoError(t, err)
		defer consumer.Close()
		fetches := consumer.PollFetches(ctx)
		require.NoError(t, fetches.Err())
		recs := fetches.Records()
		require.Len(t, recs, 1)
		require.Equal(t, "hello", string(recs[0].Value))
	})

	t.Run("SCRAM-SHA-256 with the password as a flag", func(t *testing.T) {
		c := serveFlags(t, "--kafka-brokers", k.SecureAddr, "--kafka-tls-ca-file", k.TLS.CAFile,
			"--kafka-tls-cert-file", k.TLS.ClientCertFile, "--kafka-tls-key-file", k.TLS.ClientKeyFile,
			"--kafka-sasl-mechanism", "scram-sha-256", "--kafka-sasl-username", k.User, "--kafka-sasl-password", k.Password)
		require.NoError(t, listBrokers(t, c))
	})

	t.Run("PLAIN", func(t *testing.T) {
		c := serveFlags(t, "--kafka-brokers", k.SecureAddr, "--kafka-tls-ca-file", k.TLS.CAFile,
			"--kafka-tls-cert-file", k.TLS.ClientCertFile, "--kafka-tls-key-file", k.TLS.ClientKeyFile,
			"--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-username", k.User, "--kafka-sasl-password", k.Password)
		require.NoError(t, listBrokers(t, c))
	})

	t.Run("a wrong password is an authentication error", func(t *testing.T) {
		args := append(kafkaFlags(k), "--kafka-sasl-password-file", secretFile(t, "not-"+k.Password))
		err := listBrokers(t, serveFlags(t, args...))
		require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
		require.NotContains(t, err.Error(), k.Password)
	})

	t.Run("without TLS the broker does not answer", func(t *testing.T) {
		c := serveFlags(t, "--kafka-brokers", k.SecureAddr, "--kafka-sasl-mechanism", "SCRAM-SHA-512",
			"--kafka-sasl-username", k.User, "--kafka-sasl-password-file", secretFile(t, k.Password))
		require.Error(t, listBrokers(t, c))
	})

	t.Run("a CA that did not sign the broker's certificate is refused", func(t *testing.T) {
		other := privatestack.NewTLSFiles(t, t.TempDir())
		args := append(kafkaFlags(k), "--kafka-sasl-password", k.Password, "--kafka-tls-ca-file", other.CAFile)
		err := listBrokers(t, serveFlags(t, args...))
		var verr *tls.CertificateVerificationError
		require.True(t, errors.As(err, &verr), "want a certificate verification error, got %v", err)
	})

	t.Run("herald serve delivers through secured Kafka and Redis", func(t *testing.T) {
		testSecureServe(t, k, r)
	})
}

// testSecureServe runs `herald serve` (ingest, relay, dispatch) against k and r, with the
// passwords in their variables, and sends SMS through it. The log names the mechanism and never a password.
func testSecureServe(t *testing.T, k, r *privatestack.Instance) {
	e := &e2e{st: newStack(t), sim: startSim(t), addr: heraldtest.FreeAddr(t)}
	e.st.args = append(e.st.args, kafkaFlags(k)...)
	e.st.args = append(e.st.args, "--redis-addr", r.SecureAddr, "--redis-tls-ca-file", r.TLS.CAFile,
		"--redis-tls-cert-file", r.TLS.ClientCertFile, "--redis-tls-key-file", r.TLS.ClientKeyFile,
		"--redis-username", r.User)
	e.sim.env["HERALD_KAFKA_SASL_PASSWORD"] = k.Password
	e.sim.env["HERALD_REDIS_PASSWORD"] = r.Password
	e.key = e.st.apiKey(t)
	pool, err := pgxpool.New(context.Background(), e.st.dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e.pool = pool
	e.first = e.serve(t, "serve")
	e.put(t, "/api/templates/otp", otpTemplate)
	e.put(t, "/api/users/1", `{"phone": "+15550100001"}`)

	rdb := secureRedis(t, r)
	require.NoError(t, rdb.ConfigResetStat(context.Background()).Err())
	e.post(t, "secure", 2, 1, "SMS")
	c := e.waitAllFinal(t, 2, 90*time.Second)
	require.Equal(t, 2, c["SENT"], "deliveries: %v", c)

	// dispatch took its leases (SET NX) in the secured Redis, not in degraded mode.
	stats, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	require.Contains(t, stats, "cmdstat_set:", "no SET reached the secured Redis")

	e.first.stop()
	log, err := os.ReadFile(e.first.log)
	require.NoError(t, err)
	require.Contains(t, string(log), `"kafka_sasl_mechanism":"SCRAM-SHA-512"`)
	require.NotContains(t, string(log), k.Password)
	require.NotContains(t, string(log), r.Password)
}

// secureRedis is a go-redis client of r built from herald's flags.
func secureRedis(t *testing.T, r *privatestack.Instance) *redis.Client {
	t.Helper()
	c := serveFlags(t, "--redis-addr", r.SecureAddr, "--redis-tls-ca-file", r.TLS.CAFile,
		"--redis-tls-cert-file", r.TLS.ClientCertFile, "--redis-tls-key-file", r.TLS.ClientKeyFile,
		"--redis-username", r.User, "--redis-password-file", secretFile(t, r.Password))
	o, err := c.Redis.options(c.RedisAddr)
	require.NoError(t, err)
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// redisPing is one PING with c's Redis options, no retries.
func redisPing(t *testing.T, c serveConfig) error {
	t.Helper()
	o, err := c.Redis.options(c.RedisAddr)
	require.NoError(t, err)
	o.MaxRetries, o.DialTimeout = -1, 3*time.Second
	rdb := redis.NewClient(o)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return rdb.Ping(ctx).Err()
}

func TestSecureRedis(t *testing.T) {
	t.Parallel()
	r := privatestack.Start(t, privatestack.Redis, privatestack.Secured())
	good := []string{"--redis-addr", r.SecureAddr, "--redis-tls-ca-file", r.TLS.CAFile,
		"--redis-tls-cert-file", r.TLS.ClientCertFile, "--redis-tls-key-file", r.TLS.ClientKeyFile,
		"--redis-username", r.User}

	t.Run("herald's options PING", func(t *testing.T) {
		require.NoError(t, redisPing(t, serveFlags(t, append(good, "--redis-password-file", secretFile(t, r.Password))...)))
	})
	t.Run("a wrong password fails", func(t *testing.T) {
		err := redisPing(t, serveFlags(t, append(good, "--redis-password", "not-"+r.Password)...))
		require.ErrorContains(t, err, "WRONGPASS")
		require.NotContains(t, err.Error(), r.Password)
	})
	t.Run("without TLS the TLS port does not answer", func(t *testing.T) {
		require.Error(t, redisPing(t, serveFlags(t, "--redis-addr", r.SecureAddr,
			"--redis-username", r.User, "--redis-password", r.Password)))
	})
	t.Run("a CA that did not sign the server's certificate is refused", func(t *testing.T) {
		other := privatestack.NewTLSFiles(t, t.TempDir())
		err := redisPing(t, serveFlags(t, append(good, "--redis-password", r.Password, "--redis-tls-ca-file", other.CAFile)...))
		var verr *tls.CertificateVerificationError
		require.True(t, errors.As(err, &verr), "want a certificate verification error, got %v", err)
	})
	t.Run("without a client certificate the server refuses", func(t *testing.T) {
		err := redisPing(t, serveFlags(t, "--redis-addr", r.SecureAddr, "--redis-tls-ca-file", r.TLS.CAFile,
			"--redis-username", r.User, "--redis-password", r.Password))
		require.Error(t, err)
	})
}

// TestSecurePostgresVerifyFull: herald's pool connects with sslmode=verify-full and the CA
// in sslrootcert, over TLS, and refuses a server its CA did not sign.
func TestSecurePostgresVerifyFull(t *testing.T) {
	t.Parallel()
	pg := privatestack.Start(t, privatestack.Postgres, privatestack.Secured())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := func(host, ca string) string {
		_, port, _ := strings.Cut(pg.SecureAddr, ":")
		return "postgres://postgres@" + host + ":" + port + "/postgres?sslmode=verify-full&sslrootcert=" + ca
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		c := serveFlags(t, "--database-url", url(host, pg.TLS.CAFile))
		pool, err := openPool(ctx, c.commonConfig, "herald")
		require.NoError(t, err, host)
		var ssl bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl))
		pool.Close()
		require.True(t, ssl, "the connection to %s is not TLS", host)
	}

	other := privatestack.NewTLSFiles(t, t.TempDir())
	_, err := openPool(ctx, serveFlags(t, "--database-url", url("127.0.0.1", other.CAFile)).commonConfig, "herald")
	var verr *tls.CertificateVerificationError
	require.True(t, errors.As(err, &verr), "want a certificate verification error, got %v", err)
}
