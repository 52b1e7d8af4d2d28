package dispatch

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

type quietRedisLog struct{}

func (quietRedisLog) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	// go-redis logs every failed dial; the Redis outage tests cause many on purpose.
	redis.SetLogger(quietRedisLog{})
	goleak.VerifyTestMain(m)
}
