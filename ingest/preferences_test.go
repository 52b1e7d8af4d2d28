package ingest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// accepted posts a notification, requires 202 and returns the answer.
func (e *env) accepted(key, body string) map[string]any {
	e.t.Helper()
	res := e.post(key, body)
	require.Equal(e.t, http.StatusAccepted, res.status, "%s", res.body)
	return res.json(e.t)
}

func channelsOf(list any) map[string]string {
	out := map[string]string{}
	for _, x := range list.([]any) {
		m := x.(map[string]any)
		v, _ := m["reason"].(string)
		if v == "" {
			v, _ = m["status"].(string)
		}
		out[m["channel"].(string)] = v
	}
	return out
}

func TestPreferencesDecideDeliveries(t *testing.T) {
	e := newEnv(t)
	e.template("promo", "marketing", "PUSH", "EMAIL", "SMS", "WEBHOOK")
	e.template("otp", "security", "EMAIL", "SMS")
	e.user(1, map[string]any{
		"email": "u1@example.com", "phone": "+15551230001", "webhookUrl": "https://example.com/hook",
		"pushTokens": []map[string]any{{"token": "tok-1", "platform": "FCM"}},
	})
	res := e.do(http.MethodPut, "/api/users/1/preferences", map[string]any{
		"optOuts": []map[string]any{{"channel": "SMS", "category": "marketing"}, {"channel": "EMAIL"}},
	}, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)

	// Marketing: SMS is opted out for the category, EMAIL for every category.
	a := e.accepted("m1", `{"userId":1,"template":"promo","channels":["SMS","EMAIL","PUSH","WEBHOOK"]}`)
	require.Equal(t, map[string]string{"PUSH": "PENDING", "WEBHOOK": "PENDING"}, channelsOf(a["deliveries"]))
	require.Equal(t, map[string]string{"SMS": "opted_out", "EMAIL": "opted_out"}, channelsOf(a["suppressed"]))

	// The template's category (security) is not opted out for SMS; an explicit category is.
	a = e.accepted("s1", `{"userId":1,"template":"otp","channels":["SMS","EMAIL"]}`)
	require.Equal(t, map[string]string{"SMS": "PENDING"}, channelsOf(a["deliveries"]))
	require.Equal(t, map[string]string{"EMAIL": "opted_out"}, channelsOf(a["suppressed"]))
	a = e.accepted("s2", `{"userId":1,"template":"otp","channels":["SMS"],"category":"marketing"}`)
	require.Empty(t, a["deliveries"])

	// Every channel suppressed: still accepted, with no delivery row; the opt-out wins over
	// an inline address.
	a = e.accepted("all", `{"userId":1,"template":"otp","channels":["EMAIL"],"to":{"email":"other@example.com"}}`)
	require.Equal(t, []any{}, a["deliveries"])
	require.Equal(t, map[string]string{"EMAIL": "opted_out"}, channelsOf(a["suppressed"]))
	var deliveries int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM delivery WHERE notification_id = $1`, a["id"]).Scan(&deliveries))
	require.Zero(t, deliveries)

	// No stored contact: no_contact, unless "to" gives the address.
	a = e.accepted("nc1", `{"userId":2,"template":"otp","channels":["SMS","EMAIL"]}`)
	require.Empty(t, a["deliveries"])
	require.Equal(t, map[string]string{"SMS": "no_contact", "EMAIL": "no_contact"}, channelsOf(a["suppressed"]))
	a = e.accepted("nc2", `{"userId":2,"template":"otp","channels":["SMS","EMAIL"],"to":{"phone":"+15551230002"}}`)
	require.Equal(t, map[string]string{"SMS": "PENDING"}, channelsOf(a["deliveries"]))
	require.Equal(t, map[string]string{"EMAIL": "no_contact"}, channelsOf(a["suppressed"]))
	var recipient string
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT recipient::text FROM notification WHERE id = $1`, a["id"]).Scan(&recipient))
	require.JSONEq(t, `{"phone":"+15551230002"}`, recipient)

	// GET shows the deliveries and the suppressed channels.
	got := e.do(http.MethodGet, "/api/notifications/"+a["id"].(string), nil, nil)
	require.Equal(t, http.StatusOK, got.status, "%s", got.body)
	n := got.json(t)
	require.Equal(t, "security", n["category"])
	require.Equal(t, "NORMAL", n["priority"])
	d := n["deliveries"].([]any)[0].(map[string]any)
	require.Equal(t, "SMS", d["channel"])
	require.Equal(t, "PENDING", d["status"])
	require.Equal(t, float64(0), d["attempts"])
	require.NotNil(t, d["nextAttemptAt"])
	require.Nil(t, d["lastError"])
	require.Nil(t, d["sentAt"])
	require.Equal(t, map[string]string{"EMAIL": "no_contact"}, channelsOf(n["suppressed"]))
}

// TestDeliveryRows checks what a delivery row carries and when it is due.
func TestDeliveryRows(t *testing.T) {
	e := newEnv(t)
	e.template("otp", "security", "SMS", "EMAIL")
	e.user(3, map[string]any{"email": "u3@example.com", "phone": "+15551230003"})

	a := e.accepted("now", `{"userId":3,"template":"otp","channels":["SMS","EMAIL"],"priority":"HIGH","expiresAt":"2099-01-01T00:00:00Z"}`)
	rows, err := e.pool.Query(context.Background(), `
		SELECT d.priority, d.expires_at, d.traceparent = n.traceparent, d.status, d.attempts,
		       d.next_attempt_at = n.created_at, d.next_attempt_at <= d.updated_at
		FROM delivery d JOIN notification n ON n.id = d.notification_id WHERE n.id = $1`, a["id"])
	require.NoError(t, err)
	count := 0
	for rows.Next() {
		var (
			prio, status               string
			expires                    time.Time
			sameTrace, atCommit, isDue bool
			attempts                   int
		)
		require.NoError(t, rows.Scan(&prio, &expires, &sameTrace, &status, &attempts, &atCommit, &isDue))
		require.Equal(t, "HIGH", prio)
		require.True(t, expires.Equal(utc("2099-01-01T00:00:00Z")))
		require.True(t, sameTrace, "the delivery carries the notification's traceparent")
		require.Equal(t, "PENDING", status)
		require.Zero(t, attempts)
		require.True(t, atCommit, "due now means the transaction's now()")
		require.True(t, isDue, "the relay publishes it at once")
		count++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 2, count)

	// sendAt sets next_attempt_at; the row is not due at write time.
	a = e.accepted("later", `{"userId":3,"template":"otp","channels":["SMS"],"sendAt":"2099-06-01T12:00:00+02:00"}`)
	var next, sendAt time.Time
	var isDue bool
	require.NoError(t, e.pool.QueryRow(context.Background(), `
		SELECT d.next_attempt_at, n.send_at, d.next_attempt_at <= d.updated_at
		FROM delivery d JOIN notification n ON n.id = d.notification_id WHERE n.id = $1`, a["id"]).Scan(&next, &sendAt, &isDue))
	require.True(t, next.Equal(utc("2099-06-01T10:00:00Z")), "%s", next)
	require.True(t, sendAt.Equal(next))
	require.False(t, isDue)
}

func (e *env) nextAttempt(id any) time.Time {
	e.t.Helper()
	var next time.Time
	require.NoError(e.t, e.pool.QueryRow(context.Background(),
		`SELECT next_attempt_at FROM delivery WHERE notification_id = $1`, id).Scan(&next))
	return next.UTC()
}

// TestQuietHoursNow uses a window around the database's current time in a zone with a
// half-hour offset: NORMAL and LOW wait for its end, HIGH does not.
func TestQuietHoursNow(t *testing.T) {
	e := newEnv(t)
	e.template("otp", "security", "SMS")
	e.user(4, map[string]any{"phone": "+15551230004", "timeZone": "Asia/Kolkata"})

	var dbNow time.Time
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT now()`).Scan(&dbNow))
	kolkata := mustLoc(t, "Asia/Kolkata") // no DST: durations and wall clock agree
	local := dbNow.In(kolkata).Truncate(time.Minute)
	start, end := local.Add(-time.Hour), local.Add(time.Hour)
	res := e.do(http.MethodPut, "/api/users/4/preferences", map[string]any{
		"quietHours": map[string]any{"start": start.Format("15:04"), "end": end.Format("15:04")},
	}, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)

	for _, prio := range []string{"NORMAL", "LOW"} {
		a := e.accepted("q-"+prio, `{"userId":4,"template":"otp","channels":["SMS"],"priority":"`+prio+`"}`)
		require.True(t, end.Equal(e.nextAttempt(a["id"])), "%s: next attempt %s, want %s", prio, e.nextAttempt(a["id"]), end.UTC())
	}
	a := e.accepted("q-HIGH", `{"userId":4,"template":"otp","channels":["SMS"],"priority":"HIGH"}`)
	require.WithinDuration(t, dbNow, e.nextAttempt(a["id"]), time.Minute, "HIGH bypasses quiet hours")
	require.True(t, e.nextAttempt(a["id"]).Before(end.Add(-30*time.Minute)))
}

// TestQuietHoursAcrossDST schedules sends on the nights New York changes its clocks: the
// window 22:00–07:00 ends at 07:00 local time, 7 or 9 real hours after it began.
func TestQuietHoursAcrossDST(t *testing.T) {
	e := newEnv(t)
	e.template("digest", "news", "EMAIL")
	e.user(6, map[string]any{"email": "u6@example.com", "timeZone": "America/New_York"})
	res := e.do(http.MethodPut, "/api/users/6/preferences", map[string]any{
		"quietHours": map[string]any{"start": "22:00", "end": "07:00"},
	}, nil)
	require.Equal(t, http.StatusOK, res.status, "%s", res.body)

	cases := []struct{ sendAt, want string }{
		{"2027-03-13T23:00:00-05:00", "2027-03-14T11:00:00Z"}, // spring forward: 07:00 EDT
		{"2027-11-06T23:00:00-04:00", "2027-11-07T12:00:00Z"}, // fall back: 07:00 EST
		{"2027-11-07T01:30:00-05:00", "2027-11-07T12:00:00Z"}, // in the repeated hour
		{"2027-03-14T12:00:00-04:00", "2027-03-14T16:00:00Z"}, // outside the window: sendAt
	}
	for i, tc := range cases {
		a := e.accepted("dst-"+itoa(int64(i)), `{"userId":6,"template":"digest","channels":["EMAIL"],"priority":"LOW","sendAt":"`+tc.sendAt+`"}`)
		require.Equal(t, utc(tc.want), e.nextAttempt(a["id"]), "sendAt %s", tc.sendAt)
	}
}

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}
