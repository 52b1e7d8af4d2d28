package events

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/apikey"
)

// childEnv makes the test binary run as an events worker (runChild), so that a test can
// kill it with SIGKILL.
const childEnv = "HERALD_EVENTS_TEST_CHILD"

type childSpec struct {
	DSN    string
	Config Config
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
	// A short session lets the group drop the killed member quickly (the broker's minimum).
	spec.Config.ClientOptions = []kgo.Opt{kgo.SessionTimeout(6 * time.Second)}
	r, err := New(spec.Config, pool, apikey.NewWebhookSecrets(pool, 0), zap.NewNop())
	if err != nil {
		fmt.Fprintln(os.Stderr, "child role:", err)
		return 2
	}
	if err := r.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child run:", err)
		return 1
	}
	return 0
}
