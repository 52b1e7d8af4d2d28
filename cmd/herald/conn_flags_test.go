package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSecureConnFlagsValidate: settings that cannot work stop the start, and the message
// names flags, never the password given.
func TestSecureConnFlagsValidate(t *testing.T) {
	const pw = "s3cret-Pa55word"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown mechanism", []string{"--kafka-sasl-mechanism", "GSSAPI", "--kafka-sasl-username", "u", "--kafka-sasl-password", pw}, "unknown mechanism"},
		{"mechanism without user", []string{"--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-password", pw}, "needs --kafka-sasl-username"},
		{"password without mechanism", []string{"--kafka-sasl-username", "u", "--kafka-sasl-password", pw}, "need --kafka-sasl-mechanism"},
		{"password and file", []string{"--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-username", "u", "--kafka-sasl-password", pw, "--kafka-sasl-password-file", "/x"}, "give one, not both"},
		{"kafka cert without key", []string{"--kafka-tls-cert-file", "/c.pem"}, "--kafka-tls-cert-file and --kafka-tls-key-file go together"},
		{"redis user without password", []string{"--redis-username", "u"}, "--redis-username needs --redis-password"},
		{"redis key without cert", []string{"--redis-tls-key-file", "/k.pem", "--redis-password", pw}, "--redis-tls-cert-file and --redis-tls-key-file go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serveFlags(t, tc.args...)
			err := c.validate()
			if err == nil { // a file-level problem shows when the options are built
				_, err = c.Kafka.options(c.KafkaBrokers)
			}
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), pw)
		})
	}
}

func TestSecureConnOptions(t *testing.T) {
	c := serveFlags(t, "--redis-addr", "localhost:6380", "--redis-tls", "--redis-password-file", secretFile(t, "pw"))
	o, err := c.Redis.options(c.RedisAddr)
	require.NoError(t, err)
	require.Equal(t, "pw", o.Password, "the file's trailing newline is not part of the password")
	require.Equal(t, "localhost", o.TLSConfig.ServerName, "the name to verify defaults to the host dialled")

	c = serveFlags(t)
	o, err = c.Redis.options(c.RedisAddr)
	require.NoError(t, err)
	require.Nil(t, o.TLSConfig, "TLS is off unless asked for")
	opts, err := c.Kafka.options(c.KafkaBrokers)
	require.NoError(t, err)
	require.Len(t, opts, 1, "only the seed brokers")
}

// TestSecureHelpHidesSecrets: `herald serve -h` prints defaults taken from the variables;
// passwords, also the one in the database URL, are not among them.
func TestSecureHelpHidesSecrets(t *testing.T) {
	t.Setenv("HERALD_DATABASE_URL", "postgres://herald:db-Pa55word@db.internal:5432/herald?sslmode=verify-full")
	t.Setenv("HERALD_KAFKA_SASL_PASSWORD", "kafka-Pa55word")
	t.Setenv("HERALD_REDIS_PASSWORD", "redis-Pa55word")
	var c serveConfig
	f := newFlags("serve")
	c.register(f)
	var out bytes.Buffer
	f.SetOutput(&out)
	f.PrintDefaults()
	require.Contains(t, out.String(), "postgres://herald:xxxxx@db.internal:5432/herald?sslmode=verify-full")
	require.NotContains(t, out.String(), "Pa55word")
	require.NoError(t, f.Parse(nil))
	require.Equal(t, "postgres://herald:db-Pa55word@db.internal:5432/herald?sslmode=verify-full", c.DatabaseURL)
	require.Equal(t, "kafka-Pa55word", c.Kafka.SASLPassword.value)
}
