// Command kafkaready is the readiness probe that deploy/local/stack.sh runs against the local
// Kafka broker: one real client round trip (a Metadata request through kadm) that must list
// at least one broker. It exits 0 when the broker answers and 1 otherwise.
//
//	kafkaready -brokers 127.0.0.1:59092 -timeout 5s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:59092", "comma-separated seed brokers")
	timeout := flag.Duration("timeout", 5*time.Second, "deadline of the round trip")
	flag.Parse()

	if err := probe(strings.Split(*brokers, ","), *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "kafkaready:", err)
		os.Exit(1)
	}
}

func probe(seeds []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.DialTimeout(timeout),
		kgo.RequestRetries(0),
	)
	if err != nil {
		return fmt.Errorf("new client for %v: %w", seeds, err)
	}
	defer cl.Close()

	brokers, err := kadm.NewClient(cl).ListBrokers(ctx)
	if err != nil {
		return fmt.Errorf("list brokers at %v: %w", seeds, err)
	}
	if len(brokers) == 0 {
		return fmt.Errorf("list brokers at %v: no broker in the metadata", seeds)
	}
	for _, b := range brokers {
		fmt.Printf("broker %d at %s:%d\n", b.NodeID, b.Host, b.Port)
	}
	return nil
}
