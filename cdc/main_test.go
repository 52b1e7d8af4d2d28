package cdc

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
)

// childEnv, when set, turns the test binary into a relay process that tests start and kill
// with SIGKILL: the only honest way to test a relay that dies without a graceful shutdown.
const childEnv = "HERALD_CDC_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	goleak.VerifyTestMain(m)
}

// childConfig is what a parent test passes to a relay child process, in environment
// variables.
type childConfig struct {
	URL, Slot, Publication, Brokers, EventsTopic string
	Topics                                       map[herald.Priority]string
	MaxInFlight                                  int
}

func (c childConfig) env() []string {
	return append(os.Environ(),
		childEnv+"=1",
		"HERALD_CDC_TEST_URL="+c.URL,
		"HERALD_CDC_TEST_SLOT="+c.Slot,
		"HERALD_CDC_TEST_PUBLICATION="+c.Publication,
		"HERALD_CDC_TEST_BROKERS="+c.Brokers,
		"HERALD_CDC_TEST_TOPICS="+c.Topics[herald.PriorityHigh]+","+c.Topics[herald.PriorityNormal]+","+c.Topics[herald.PriorityLow],
		"HERALD_CDC_TEST_EVENTS_TOPIC="+c.EventsTopic,
		fmt.Sprintf("HERALD_CDC_TEST_MAX_IN_FLIGHT=%d", c.MaxInFlight),
	)
}

// runChild runs one relay with the configuration from the environment until SIGTERM/SIGINT
// (or SIGKILL, which is the point). It logs JSON to stderr.
func runChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log, _ := zap.NewProduction()
	topics := strings.Split(os.Getenv("HERALD_CDC_TEST_TOPICS"), ",")
	var maxInFlight int
	_, _ = fmt.Sscan(os.Getenv("HERALD_CDC_TEST_MAX_IN_FLIGHT"), &maxInFlight)
	pool, err := pgxpool.New(ctx, os.Getenv("HERALD_CDC_TEST_URL"))
	if err != nil {
		log.Error("pool", zap.Error(err))
		return 1
	}
	defer pool.Close()
	kc, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(os.Getenv("HERALD_CDC_TEST_BROKERS"), ",")...),
		kgo.ProducerLinger(0))
	if err != nil {
		log.Error("kafka", zap.Error(err))
		return 1
	}
	defer kc.Close()
	r, err := New(Config{
		Slot:        os.Getenv("HERALD_CDC_TEST_SLOT"),
		Publication: os.Getenv("HERALD_CDC_TEST_PUBLICATION"),
		Topics: map[herald.Priority]string{
			herald.PriorityHigh: topics[0], herald.PriorityNormal: topics[1], herald.PriorityLow: topics[2],
		},
		EventsTopic:    os.Getenv("HERALD_CDC_TEST_EVENTS_TOPIC"),
		MaxInFlight:    maxInFlight,
		StatusInterval: time.Second,
		SweepInterval:  200 * time.Millisecond,
		LeaderRetry:    200 * time.Millisecond,
		GracePeriod:    10 * time.Minute, // recovery must come from the slot, not the sweeper
	}, pool, kc, log)
	if err != nil {
		log.Error("new relay", zap.Error(err))
		return 1
	}
	if err := r.Run(ctx); err != nil {
		log.Error("run", zap.Error(err))
		return 1
	}
	return 0
}
