package ingest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/pgpool"
	"github.com/heraldhq/herald/internal/stacktest"
)

// BenchmarkPostNotification measures accepted POST /api/notifications per second over
// loopback HTTP on the real PostgreSQL: a notification with two deliveries each (both
// rendered from the template at accept), from many concurrent clients. Run:
//
//	go test -run '^$' -bench BenchmarkPostNotification -benchtime 10s ./ingest
func BenchmarkPostNotification(b *testing.B) {
	ctx := context.Background()
	unrecorded(b) // a real SDK provider, as in production, without keeping the spans
	cfg, err := pgpool.ParseConfig(stacktest.PostgresURL(b))
	require.NoError(b, err)
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(b, err)
	defer pool.Close()

	// A closed loop measures throughput: a request waits for its admission slot however long
	// it takes rather than being shed (the 503 of an overloaded machine is not what this counts).
	api, err := New(Config{AdmissionWait: time.Minute}, pool, zap.NewNop())
	require.NoError(b, err)
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	e := &env{t: b, pool: pool, srv: srv}
	c, err := apikey.CreateAPIClient(ctx, pool, "bench", apikey.AllScopes())
	require.NoError(b, err)
	e.key = c.Key
	// Content with variables, so that every POST renders both channels as it does in production.
	e.templateWith("otp", "security", map[string]any{
		"SMS":   map[string]any{"default": map[string]any{"text": "Your code is {{.code}}"}},
		"EMAIL": map[string]any{"default": map[string]any{"subject": "Your code", "text": "Your code is {{.code}}"}},
	}, "SMS", "EMAIL")
	const users = 1000
	_, err = pool.Exec(ctx, `INSERT INTO user_contact (user_id, email, phone)
		SELECT i, 'u' || i || '@example.com', '+1555' || lpad(i::text, 7, '0') FROM generate_series(1, $1) AS i`, users)
	require.NoError(b, err)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	defer client.CloseIdleConnections()
	var seq atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := seq.Add(1)
			body := fmt.Sprintf(`{"userId":%d,"template":"otp","channels":["SMS","EMAIL"],"payload":{"code":"%06d"}}`, i%users+1, i%1000000)
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/notifications", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+e.key)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-%d", i))
			res, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusAccepted {
				b.Errorf("status %d", res.StatusCode)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "POST/s")
}
