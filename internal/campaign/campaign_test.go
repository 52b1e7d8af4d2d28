package campaign

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/recipient"
	"github.com/heraldhq/herald/internal/stacktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture is one test's database with an API client and a user directory.
type fixture struct {
	t        *testing.T
	pool     *pgxpool.Pool
	clientID string
}

func newFixture(t *testing.T) *fixture {
	pool := stacktest.Postgres(t)
	c, err := apikey.CreateAPIClient(context.Background(), pool, "test", apikey.AllScopes())
	require.NoError(t, err)
	return &fixture{t: t, pool: pool, clientID: c.ID}
}

// directory writes users 1..n: every user has an e-mail address, an odd one a phone number
// too; user 3 opted out of SMS for every category.
func (f *fixture) directory(n int) {
	ctx := context.Background()
	_, err := f.pool.Exec(ctx, `
INSERT INTO user_contact (user_id, email, phone)
SELECT g, 'u' || g || '@example.com', CASE WHEN g % 2 = 1 THEN '+1555' || lpad(g::text, 7, '0') END
FROM generate_series(1, $1::int) AS g`, n)
	require.NoError(f.t, err)
	_, err = f.pool.Exec(ctx, `INSERT INTO user_preference (user_id, opt_outs) VALUES (3, '[{"channel":"SMS"}]')`)
	require.NoError(f.t, err)
}

// insert writes a campaign of SMS and e-mail to userIDs in status through Insert.
func (f *fixture) insert(key string, status herald.CampaignStatus, userIDs ...int64) uuid.UUID {
	id := uuid.Must(uuid.NewV7())
	err := pgx.BeginFunc(context.Background(), f.pool, func(tx pgx.Tx) error {
		ok, err := Insert(context.Background(), tx, Row{ID: id, ClientID: f.clientID, IdempotencyKey: key,
			RequestHash: []byte(key), Response: map[string]string{"id": id.String()}, Name: key, Template: "promo",
			Category: "marketing", Channels: []herald.Channel{herald.ChannelEmail, herald.ChannelSMS},
			Priority: herald.PriorityLow, Payload: []byte(`{}`), UserIDs: userIDs, Status: status})
		require.True(f.t, ok)
		return err
	})
	require.NoError(f.t, err)
	return id
}

type state struct {
	Status     herald.CampaignStatus
	Audience   int64
	Expanded   int64
	Suppressed map[string]int64
}

func (f *fixture) state(id uuid.UUID) state {
	var s state
	require.NoError(f.t, f.pool.QueryRow(context.Background(),
		`SELECT status, audience, expanded, suppressed FROM campaign WHERE id = $1`, id).Scan(&s.Status, &s.Audience, &s.Expanded, &s.Suppressed))
	return s
}

// deliveries counts the campaign's deliveries by channel and status.
func (f *fixture) deliveries(id uuid.UUID) map[string]int {
	rows, err := f.pool.Query(context.Background(), `SELECT d.channel || ' ' || d.status FROM notification n
JOIN delivery d ON d.notification_id = n.id WHERE n.campaign_id = $1`, id)
	require.NoError(f.t, err)
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(f.t, err)
	out := map[string]int{}
	for _, k := range keys {
		out[k]++
	}
	return out
}

// Lot by lot, a campaign's users go through the rules of a single POST: 10 users and one the
// directory does not hold, in lots of 4. The last, short lot ends the expansion ACTIVE; the
// campaign row counts what was suppressed and why; each notification's key is derived from
// the campaign and the user, so a lot written again inserts nothing twice.
func TestLotsFollowTheRecipientRules(t *testing.T) {
	f := newFixture(t)
	f.directory(10)
	id := f.insert("list", herald.CampaignExpanding, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 9_000_001)
	x, err := NewExpander(ExpanderConfig{LotSize: 4, Rate: -1}, f.pool, zaptest.NewLogger(t))
	require.NoError(t, err)
	ctx := context.Background()
	var written int
	for lot := range 3 {
		worked, n, err := x.ExpandLot(ctx)
		require.NoError(t, err)
		require.True(t, worked, "lot %d", lot)
		written += n
		if lot < 2 {
			require.Equal(t, herald.CampaignExpanding, f.state(id).Status, "after lot %d", lot)
		}
	}
	worked, _, err := x.ExpandLot(ctx)
	require.NoError(t, err)
	require.False(t, worked, "nothing left to expand")

	// E-mail for all 10; SMS for the odd users but user 3, who opted out.
	require.Equal(t, 14, written)
	require.Equal(t, map[string]int{"EMAIL PENDING": 10, "SMS PENDING": 4}, f.deliveries(id))
	s := f.state(id)
	require.Equal(t, herald.CampaignActive, s.Status)
	require.EqualValues(t, 11, s.Expanded)
	require.Equal(t, map[string]int64{recipient.ReasonNoContact: 5, recipient.ReasonOptedOut: 1, recipient.ReasonUnknownUser: 2},
		s.Suppressed)

	var keys []string
	rows, err := f.pool.Query(ctx, `SELECT k.idempotency_key FROM idempotency_key k JOIN notification n ON n.id = k.notification_id
WHERE n.campaign_id = $1 ORDER BY n.user_id`, id)
	require.NoError(t, err)
	keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Len(t, keys, 10)
	require.Equal(t, "campaign\u00b7"+id.String()+"\u00b71", keys[0])
}

// The state changes: Start moves a DRAFT campaign to EXPANDING, Stage counts a repeated id
// once, Cancel ends the open deliveries CANCELLED with the campaign, and the expander ends a
// campaign whose deliveries are all final DONE while one with an open delivery stays ACTIVE.
func TestStateChanges(t *testing.T) {
	f := newFixture(t)
	f.directory(4)
	ctx := context.Background()
	draft := f.insert("draft", herald.CampaignDraft, 1)
	change := func(id uuid.UUID, fn func(tx pgx.Tx, status herald.CampaignStatus, segment bool) error) {
		require.NoError(t, pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
			status, segment, err := Lock(ctx, tx, id, f.clientID)
			if err != nil {
				return err
			}
			return fn(tx, status, segment)
		}))
	}
	change(draft, func(tx pgx.Tx, status herald.CampaignStatus, segment bool) error {
		require.Equal(t, herald.CampaignDraft, status)
		require.False(t, segment)
		return Stage(ctx, tx, draft, []int64{1, 2})
	})
	require.EqualValues(t, 2, f.state(draft).Audience, "user 1 was staged already")
	change(draft, func(tx pgx.Tx, _ herald.CampaignStatus, _ bool) error { return Start(ctx, tx, draft) })
	require.Equal(t, herald.CampaignExpanding, f.state(draft).Status)
	err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
		_, _, err := Lock(ctx, tx, draft, uuid.NewString())
		return err
	})
	require.ErrorIs(t, err, ErrNotFound, "another client's campaign")

	x, err := NewExpander(ExpanderConfig{Rate: -1, DoneInterval: time.Nanosecond}, f.pool, zaptest.NewLogger(t))
	require.NoError(t, err)
	worked, _, err := x.ExpandLot(ctx)
	require.NoError(t, err)
	require.True(t, worked)
	require.Equal(t, map[string]int{"EMAIL PENDING": 2, "SMS PENDING": 1}, f.deliveries(draft))
	require.NoError(t, x.markDone(ctx))
	require.Equal(t, herald.CampaignActive, f.state(draft).Status, "its deliveries are open")

	var cancelled int64
	change(draft, func(tx pgx.Tx, _ herald.CampaignStatus, _ bool) error {
		cancelled, err = Cancel(ctx, tx, draft)
		return err
	})
	require.EqualValues(t, 3, cancelled)
	require.Equal(t, herald.CampaignCancelled, f.state(draft).Status)
	require.Equal(t, map[string]int{"EMAIL CANCELLED": 2, "SMS CANCELLED": 1}, f.deliveries(draft))

	unknown := f.insert("unknown", herald.CampaignExpanding, 9_000_001) // no delivery at all
	worked, _, err = x.ExpandLot(ctx)
	require.NoError(t, err)
	require.True(t, worked)
	require.Equal(t, herald.CampaignActive, f.state(unknown).Status)
	require.NoError(t, x.markDone(ctx))
	require.Equal(t, herald.CampaignDone, f.state(unknown).Status)
	require.Equal(t, herald.CampaignCancelled, f.state(draft).Status, "a cancelled campaign is not DONE")
}
