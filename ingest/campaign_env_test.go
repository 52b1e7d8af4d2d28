package ingest

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald/internal/campaign"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// campaignPath is the path of a campaign (and of its actions with a suffix).
func campaignPath(id string, action ...string) string {
	p := "/api/campaigns/" + id
	for _, a := range action {
		p += "/" + a
	}
	return p
}

// postCampaign sends POST /api/campaigns with an Idempotency-Key.
func (e *env) postCampaign(key string, body any) response {
	e.t.Helper()
	return e.do(http.MethodPost, "/api/campaigns", body, map[string]string{"Idempotency-Key": key})
}

// campaign reads GET /api/campaigns/{id}.
func (e *env) campaign(id string) map[string]any {
	e.t.Helper()
	res := e.do(http.MethodGet, campaignPath(id), nil, nil)
	require.Equal(e.t, http.StatusOK, res.status, "%s", res.body)
	return res.json(e.t)
}

// runExpander runs an expander on the env's database until the test ends; unless cfg says
// otherwise it polls every 10 ms and is not paced.
func (e *env) runExpander(cfg campaign.ExpanderConfig) {
	e.t.Helper()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 10 * time.Millisecond
	}
	if cfg.Rate == 0 {
		cfg.Rate = -1
	}
	x, err := campaign.NewExpander(cfg, e.pool, zaptest.NewLogger(e.t))
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = x.Run(ctx)
	}()
	e.t.Cleanup(func() { cancel(); wg.Wait() })
}

// waitCampaign polls the campaign until its status is want, and returns it.
func (e *env) waitCampaign(id, want string, timeout time.Duration) map[string]any {
	e.t.Helper()
	var c map[string]any
	heraldtest.WaitFor(e.t, timeout, "campaign "+id+" "+want, func() bool {
		c = e.campaign(id)
		return c["status"] == want
	})
	return c
}

// directory fills the user directory with users 1..n by SQL (PUT /api/users one by one would
// take minutes): every user has an e-mail address; user g has
//
//	g%10 == 0: opted out of SMS for the category "marketing"
//	g%10 == 1: quiet hours from an hour ago to in an hour (UTC)
//	g%10 == 2: no phone number
//	g%5 != 4:  the tag "vip";  locale by g%3: de-AT, de, en
//
// It returns the end of the quiet window.
func (e *env) directory(n int) time.Time {
	e.t.Helper()
	ctx := context.Background()
	var now time.Time
	require.NoError(e.t, e.pool.QueryRow(ctx, `SELECT now()`).Scan(&now))
	start, end := now.Add(-time.Hour).UTC().Truncate(time.Minute), now.Add(time.Hour).UTC().Truncate(time.Minute)
	_, err := e.pool.Exec(ctx, `
INSERT INTO user_contact (user_id, email, phone, locale, tags)
SELECT g, 'u' || g || '@example.com', CASE WHEN g % 10 = 2 THEN NULL ELSE '+1555' || lpad(g::text, 7, '0') END,
       (ARRAY['de-AT', 'de', 'en'])[g % 3 + 1], CASE WHEN g % 5 <> 4 THEN ARRAY['vip'] ELSE '{}' END
FROM generate_series(1, $1::int) AS g`, n)
	require.NoError(e.t, err)
	_, err = e.pool.Exec(ctx, `
INSERT INTO user_preference (user_id, opt_outs, quiet_start, quiet_end)
SELECT g, CASE WHEN g % 10 = 0 THEN '[{"channel":"SMS","category":"marketing"}]'::jsonb ELSE '[]' END,
       CASE WHEN g % 10 = 1 THEN $2::time END, CASE WHEN g % 10 = 1 THEN $3::time END
FROM generate_series(1, $1::int) AS g WHERE g % 10 IN (0, 1)`, n, start.Format("15:04"), end.Format("15:04"))
	require.NoError(e.t, err)
	return end
}
