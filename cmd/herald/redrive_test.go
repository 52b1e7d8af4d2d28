package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery/deliverytest"
	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/senders/sim"
)

// redriveState is the part of GET /api/redrives/{id} the tests read.
type redriveState struct {
	ID       string           `json:"id"`
	Status   string           `json:"status"`
	Matched  int              `json:"matched"`
	Redriven int              `json:"redriven"`
	Skipped  map[string]int64 `json:"skipped"`
}

func getRedrive(t *testing.T, addr, key, id string) redriveState {
	t.Helper()
	var r redriveState
	doJSON(t, http.MethodGet, "http://"+addr+"/api/redrives/"+id, key, "", &r, http.StatusOK)
	return r
}

func postRedrive(t *testing.T, addr, key, idem, body string) redriveState {
	t.Helper()
	status, b, err := tryJSON(context.Background(), http.MethodPost, "http://"+addr+"/api/redrives", key, idem, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status, "%s", b)
	var r redriveState
	require.NoError(t, json.Unmarshal(b, &r))
	return r
}

// TestRedriveKilled kills the ingest process executing a re-drive (kill -9) in the middle of
// it and starts another: the new executor resumes at the cursor and runs the lot that was in
// progress again, and every delivery is re-armed exactly once: the count of re-armed
// deliveries is the number matched, and each row's timeline holds one move back to PENDING.
func TestRedriveKilled(t *testing.T) {
	st := newStack(t)
	key := st.apiKey(t)
	addr := heraldtest.FreeAddr(t)
	noSim := &simulator{}
	first := st.serve(t, "ingest-1", addr, noSim, "--roles", "ingest", "--redrive-rate", "2000")
	pool, err := pgxpool.New(context.Background(), st.dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	const n = 20_000
	deliverytest.Backlog(t, pool, n, deliverytest.Spec{Status: herald.StatusFailed, Attempts: 2})

	id := postRedrive(t, addr, key, "redrive-1", `{"filter": {"status": ["FAILED"]}}`).ID
	heraldtest.WaitFor(t, 60*time.Second, "the re-drive to be under way", func() bool {
		return getRedrive(t, addr, key, id).Redriven >= 3000
	})
	first.kill()
	var redriven int
	var status string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT redriven, status FROM redrive WHERE id = $1`, id).Scan(&redriven, &status))
	require.Equal(t, "RUNNING", status, "killed after the re-drive ended: the test proves nothing")
	t.Logf("killed with %d of %d deliveries re-armed", redriven, n)

	st.serve(t, "ingest-2", addr, noSim, "--roles", "ingest", "--redrive-rate", "-1")
	var r redriveState
	heraldtest.WaitFor(t, 3*time.Minute, "the re-drive to end", func() bool {
		r = getRedrive(t, addr, key, id)
		return r.Status == "DONE"
	})
	require.Equal(t, n, r.Matched)
	require.Equal(t, n, r.Redriven, "each delivery counted once")
	require.Empty(t, r.Skipped)
	var armed, once int
	require.NoError(t, pool.QueryRow(context.Background(), `
SELECT count(*) FILTER (WHERE status = 'PENDING' AND redrive_id = $1 AND attempts = 2 AND attempts_at_redrive = 2),
       count(*) FILTER (WHERE cardinality(array_positions(coalesce(transition_status, '{}'), 'PENDING')) = 1)
  FROM delivery`, id).Scan(&armed, &once))
	require.Equal(t, n, armed, "every delivery re-armed, attempts kept")
	require.Equal(t, n, once, "no delivery moved back to PENDING twice")
}

// TestRedriveReachesSent runs the whole pipeline with a budget of two attempts: SMS
// deliveries fail twice against a Twilio that answers 503 and end FAILED; e-mails fail
// permanently (550) and end FAILED after one. The providers recover; herald redrive's dry run
// (answered "no") changes nothing; the re-drive (--yes) skips the permanent failures, and
// the SMS deliveries reach SENT through the real relay and dispatch at attempt 3 (a budget
// counted from the re-drive: by the old count they had none left), attempt 3 naming the
// re-drive in the database and in herald trace. With --include-permanent the e-mails follow.
func TestRedriveReachesSent(t *testing.T) {
	st := newStack(t)
	key, secret := st.apiClient(t)
	e := &e2e{st: st, sim: startSim(t, "--sim-webhook-secret", secret), addr: heraldtest.FreeAddr(t), key: key}
	pool, err := pgxpool.New(context.Background(), st.dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e.pool = pool
	e.first = st.serve(t, "serve", e.addr, e.sim, append(append([]string{}, fastRecovery...), "--retry-max-attempts", "2")...)
	e.put(t, "/api/templates/otp", otpTemplate)
	e.put(t, "/api/users/1", `{"email": "user1@example.com", "phone": "+15550100001"}`)
	e.sim.setFaults(t, sim.Twilio, `{"unavailable": 1, "retryAfter": "100ms"}`)
	e.sim.setFaults(t, sim.SMTP, `{"permanent": 1}`)
	const n = 4
	ds := e.post(t, "otp", n, 1, "SMS", "EMAIL")
	c := e.waitAllFinal(t, 2*n, 2*time.Minute)
	require.Equal(t, 2*n, c["FAILED"], "%v", c)
	e.sim.setFaults(t, sim.Twilio, `{}`)
	e.sim.setFaults(t, sim.SMTP, `{}`)
	var sms, email []string
	for _, d := range ds {
		if d.Channel == "SMS" {
			sms = append(sms, d.ID)
		} else {
			email = append(email, d.ID)
		}
	}
	snapshot := func() string {
		var s string
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT string_agg(id || status || attempts || updated_at, ',' ORDER BY id) FROM delivery`).Scan(&s))
		return s
	}
	before := snapshot()

	redriveCLI := func(stdin string, args ...string) string {
		cmd := exec.Command(heraldBin, append([]string{"redrive", "--api-url", "http://" + e.addr, "--poll-interval", "50ms"}, args...)...)
		cmd.Env = append(cmd.Environ(), "HERALD_API_KEY="+key)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "herald redrive: %s", out)
		return string(out)
	}
	out := redriveCLI("n\n", "--status", "FAILED")
	require.Contains(t, out, fmt.Sprintf("%d deliveries match, %d would be re-driven, skipped: permanent %d", 2*n, n, n))
	require.Contains(t, out, "not re-driven")
	require.Equal(t, before, snapshot(), "the dry run and a refused confirmation change nothing")

	out = redriveCLI("", "--status", "FAILED", "--yes")
	require.Contains(t, out, "DONE")
	var id string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT id::text FROM redrive WHERE NOT dry_run`).Scan(&id))
	r := getRedrive(t, e.addr, key, id)
	require.Equal(t, redriveState{ID: id, Status: "DONE", Matched: 2 * n, Redriven: n, Skipped: map[string]int64{"permanent": n}}, r)

	heraldtest.WaitFor(t, time.Minute, "the re-driven SMS to be sent", func() bool {
		var sent int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM delivery WHERE id = ANY($1::uuid[]) AND status = 'SENT'`, sms).Scan(&sent))
		return sent == n
	})
	for _, d := range sms {
		rows, err := pool.Query(context.Background(), `SELECT attempt || ' ' || outcome || ' ' || coalesce(redrive_id::text, '-')
			FROM delivery_attempt WHERE delivery_id = $1 ORDER BY attempt`, d)
		require.NoError(t, err)
		var log []string
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			log = append(log, s)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{"1 AMBIGUOUS -", "2 AMBIGUOUS -", "3 SENT " + id}, log, "delivery %s: a 503 may have been taken (ambiguous, retried)", d)
	}
	var failed int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM delivery WHERE id = ANY($1::uuid[]) AND status = 'FAILED' AND redrive_id IS NULL`, email).Scan(&failed))
	require.Equal(t, n, failed, "permanent failures are skipped")

	var note struct {
		Deliveries []struct {
			ID         string
			AttemptLog []struct{ RedriveID string }
		}
	}
	var nid string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT notification_id::text FROM delivery WHERE id = $1`, sms[0]).Scan(&nid))
	doJSON(t, http.MethodGet, "http://"+e.addr+"/api/notifications/"+nid, key, "", &note, http.StatusOK)
	for _, d := range note.Deliveries {
		if d.ID == sms[0] {
			require.Len(t, d.AttemptLog, 3)
			require.Equal(t, []string{"", "", id}, []string{d.AttemptLog[0].RedriveID, d.AttemptLog[1].RedriveID, d.AttemptLog[2].RedriveID},
				"the API's attempt log names the re-drive")
		}
	}

	trace, err := exec.Command(heraldBin, "trace", "--database-url", st.dsn, sms[0]).CombinedOutput()
	require.NoError(t, err, "%s", trace)
	require.Contains(t, string(trace), "re-driven by "+id)
	require.Contains(t, string(trace), "re-drive "+id)
	require.Contains(t, string(trace), "re-driven")

	redriveCLI("", "--status", "FAILED", "--include-permanent", "--yes")
	heraldtest.WaitFor(t, time.Minute, "the re-driven e-mails to be sent", func() bool {
		var sent int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM delivery WHERE id = ANY($1::uuid[]) AND status = 'SENT' AND attempts = 2`, email).Scan(&sent))
		return sent == n
	})
}
