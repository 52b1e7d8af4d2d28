package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/dispatch"
)

// The SASL mechanisms herald speaks; "" is none.
var kafkaSASLMechanisms = []string{"", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// kafkaConn is how herald reaches Kafka besides the seed brokers: TLS and SASL. Every Kafka
// client herald builds (the relay's producer, which also creates the topics and reads the
// lanes' offsets through kadm, and every dispatch lane's consumer) takes its options from
// options, so none of them can miss a setting.
type kafkaConn struct {
	TLS           tlsFlags
	SASLMechanism string
	SASLUsername  string
	SASLPassword  secretSource
}

func (k *kafkaConn) register(f *envFlags) {
	k.TLS.register(f, "kafka", "Kafka")
	f.String(&k.SASLMechanism, "kafka-sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default none); use it with --kafka-tls")
	f.String(&k.SASLUsername, "kafka-sasl-username", "", "SASL user name")
	k.SASLPassword.register(f, "kafka-sasl-password", "SASL password")
}

func (k *kafkaConn) mechanism() string { return strings.ToUpper(k.SASLMechanism) }

func (k *kafkaConn) validate() error {
	if !slices.Contains(kafkaSASLMechanisms, k.mechanism()) {
		return fmt.Errorf("--kafka-sasl-mechanism: unknown mechanism %q (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", k.SASLMechanism)
	}
	if k.mechanism() == "" {
		if k.SASLUsername != "" || k.SASLPassword.set() {
			return fmt.Errorf("--kafka-sasl-username and --kafka-sasl-password need --kafka-sasl-mechanism")
		}
	} else if k.SASLUsername == "" || !k.SASLPassword.set() {
		return fmt.Errorf("--kafka-sasl-mechanism %s needs --kafka-sasl-username and --kafka-sasl-password (or --kafka-sasl-password-file)", k.mechanism())
	}
	return k.TLS.validate()
}

// options are the franz-go options of every herald Kafka client: the seed brokers, TLS and
// SASL. It reads the CA, key pair and password files.
func (k *kafkaConn) options(brokers []string) ([]kgo.Opt, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	tc, err := k.TLS.config()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if k.mechanism() == "" {
		return opts, nil
	}
	pass, err := k.SASLPassword.get()
	if err != nil {
		return nil, err
	}
	var m sasl.Mechanism
	switch k.mechanism() {
	case "PLAIN":
		m = plain.Auth{User: k.SASLUsername, Pass: pass}.AsMechanism()
	case "SCRAM-SHA-256":
		m = scram.Auth{User: k.SASLUsername, Pass: pass}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		m = scram.Auth{User: k.SASLUsername, Pass: pass}.AsSha512Mechanism()
	}
	return append(opts, kgo.SASL(m)), nil
}

// applyDispatch gives every dispatch lane's client the same options.
func (k *kafkaConn) applyDispatch(cfg *dispatch.Config) error {
	opts, err := k.options(cfg.Brokers)
	if err != nil {
		return err
	}
	cfg.ClientOptions = append(cfg.ClientOptions, opts...)
	return nil
}

// logFields describe the connection for the start-up log: never the password.
func (k *kafkaConn) logFields(brokers []string) []zap.Field {
	return []zap.Field{
		zap.Strings("kafka_brokers", brokers),
		zap.Bool("kafka_tls", k.TLS.on()),
		zap.String("kafka_sasl_mechanism", k.mechanism()),
	}
}
