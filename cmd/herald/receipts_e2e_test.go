package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/openapitest"
)

// TestEndToEndReceipts: herald sim, told herald's public URL, sends signed receipts (some
// twice, some out of order, a moment after each message) for every SMS (Twilio and Vonage)
// and e-mail (SendGrid) herald sends; every delivery goes SENT → DELIVERED through the real
// receipt endpoints, GET /api/notifications/{id} shows the receipt that did it, and
// herald_receipts_total counts them by provider. Every receipt request and its answer match
// docs/openapi.yaml.
func TestEndToEndReceipts(t *testing.T) {
	t.Parallel()
	const users, n = 2, 8
	e := &e2e{st: newStack(t), addr: heraldtest.FreeAddr(t)}
	admin := heraldtest.FreeAddr(t)
	e.serveArgs = []string{"--sms-providers", "twilio=50,vonage=50", "--email-providers", "sendgrid",
		"--channels", "SMS,EMAIL", "--admin-addr", admin}
	var secret string
	e.key, secret = e.st.apiClient(t)
	// herald's public URL is a proxy in front of it that checks every receipt the simulator
	// posts, and herald's answer, against docs/openapi.yaml, while the test runs: a late
	// receipt that reaches the proxy after herald has stopped (the proxy's 502) is no answer
	// of herald's.
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: e.addr})
	checked := openapitest.Handler(t, proxy)
	var checking atomic.Bool
	checking.Store(true)
	public := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if checking.Load() {
			checked.ServeHTTP(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(public.Close)
	e.sim = startSim(t, "--sim-webhook-secret", secret, "--public-url", public.URL,
		"--sim-receipts-delivered", "1", "--sim-receipts-duplicate", "0.5", "--sim-receipts-reorder", "0.5",
		"--sim-receipts-delay", "20ms")
	require.Equal(t, public.URL, e.sim.env["HERALD_PUBLIC_URL"])
	pool, err := pgxpool.New(context.Background(), e.st.dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e.pool = pool
	e.first = e.serve(t, "serve")
	t.Cleanup(func() { checking.Store(false) }) // runs before herald stops
	e.put(t, "/api/templates/otp", otpTemplate)
	for u := 1; u <= users; u++ {
		e.put(t, fmt.Sprintf("/api/users/%d", u), fmt.Sprintf(`{"email": "user%d@example.com", "phone": "+1555010%04d"}`, u, u))
	}

	sent := e.post(t, "rc", n, users, "SMS", "EMAIL")
	heraldtest.WaitFor(t, 90*time.Second, "every delivery DELIVERED", func() bool {
		return e.counts(t)["DELIVERED"] == len(sent)
	})
	require.Equal(t, map[string]int{"DELIVERED": len(sent)}, e.counts(t))

	byProvider := map[string]int{}
	for _, d := range sent {
		var nid, provider string
		require.NoError(t, e.pool.QueryRow(context.Background(),
			`SELECT notification_id::text, provider FROM delivery WHERE id = $1`, d.ID).Scan(&nid, &provider))
		var got struct {
			Deliveries []struct {
				ID, Status, Provider string
				Receipts             []struct {
					Provider, Status string
					Applied          bool
				}
			}
		}
		doJSON(t, http.MethodGet, "http://"+e.addr+"/api/notifications/"+nid, e.key, "", &got, http.StatusOK)
		applied := 0
		for _, gd := range got.Deliveries {
			if gd.ID != d.ID {
				continue
			}
			require.Equal(t, "DELIVERED", gd.Status)
			for _, r := range gd.Receipts {
				require.Equal(t, provider, r.Provider, "a receipt of the delivery's own provider")
				if r.Applied {
					applied++
					require.Equal(t, "delivered", r.Status)
				}
			}
		}
		require.Equal(t, 1, applied, "delivery %s: one receipt applied", d.ID)
		byProvider[provider]++
	}
	require.Positive(t, byProvider["sms:twilio"]+byProvider["sms:vonage"])
	require.Equal(t, n, byProvider["email:sendgrid"])

	fams := scrape(t, admin)
	for p, want := range byProvider {
		got, ok := series(fams, "herald_receipts_total", map[string]string{"provider": p, "result": "delivered"})
		require.True(t, ok, "herald_receipts_total for %s", p)
		require.Equal(t, float64(want), got, "%s: each delivery's receipt applied once", p)
	}
}
