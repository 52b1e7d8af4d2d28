package console_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// chromiumPath is Debian's chromium, which deploy/local/chromium.sh installs for make test.
const chromiumPath = "/usr/bin/chromium"

// browser starts a headless Chromium with a fresh profile and returns a chromedp context on
// it; everything ends with the test. A missing browser fails the test: the console is tested
// in a real browser or not at all.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("%s: %v (install it with deploy/local/chromium.sh)", chromiumPath, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}

// screenshot saves a full-page PNG as a test artifact (go test -artifacts keeps it under
// -outputdir) and logs its path; HERALD_CONSOLE_SCREENSHOT_DIR, when set, gets a copy.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	path := filepath.Join(t.ArtifactDir(), name)
	require.NoError(t, os.WriteFile(path, png, 0o644))
	t.Logf("screenshot: %s", path)
	if dir := os.Getenv("HERALD_CONSOLE_SCREENSHOT_DIR"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	}
}

// text returns the text of the first element sel matches.
func text[S chromedp.Selectable](t *testing.T, ctx context.Context, sel S) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	require.NoError(t, err)
	return s
}

func location(t *testing.T, ctx context.Context) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	return s
}

// TestConsoleInABrowser drives the console in headless Chromium: the log-in page (a key
// without the operator scope refused, then an operator key), the message log, a filter, a
// notification's timeline, its trace view (from a fake Jaeger) and the lag page, asserting on
// what the pages say and that no personal data is on them.
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := browser(t)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/console/"),
		chromedp.WaitVisible(chromedp.ID("key")),
		chromedp.SendKeys(chromedp.ID("key"), e.readerKey),
		chromedp.Click(chromedp.ID("login-button")),
		chromedp.WaitVisible(chromedp.ID("error")),
	))
	require.Contains(t, location(t, ctx), "/console/login")
	require.Contains(t, text(t, ctx, chromedp.ID("error")), "lacks the operator scope")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(e.srv.URL+"/console/login"),
		chromedp.WaitVisible(chromedp.ID("key")),
		chromedp.SendKeys(chromedp.ID("key"), e.operatorKey),
		chromedp.Click(chromedp.ID("login-button")),
		chromedp.WaitVisible(chromedp.ID("messages")),
	))
	table := text(t, ctx, chromedp.ID("messages"))
	for _, id := range append([]string{e.sent}, e.pending...) {
		require.Contains(t, table, id)
	}
	screenshot(t, ctx, "console-messages.png")

	// Filter: SENT, HIGH.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("f-status"), "SENT"),
		chromedp.SetValue(chromedp.ID("f-priority"), "HIGH"),
		chromedp.Click(chromedp.ID("f-apply")),
		// The page before the filter has PENDING rows; the filtered one has none.
		chromedp.WaitNotPresent(chromedp.CSS("#messages tbody tr.status-PENDING")),
		chromedp.WaitVisible(chromedp.CSS("#messages tbody tr.status-SENT")),
	))
	url := location(t, ctx)
	require.Contains(t, url, "status=SENT")
	require.Contains(t, url, "priority=HIGH")
	table = text(t, ctx, chromedp.ID("messages"))
	require.Contains(t, table, e.sent)
	for _, id := range e.pending {
		require.NotContains(t, table, id)
	}

	// The timeline of the sent delivery's notification.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#messages a[href^="/console/notifications/"]`)),
		chromedp.WaitVisible(chromedp.ID("facts")),
	))
	require.Contains(t, text(t, ctx, chromedp.ID("facts")), traceID)
	jaeger, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.ID("jaeger"), "href"))
	require.NoError(t, err)
	require.Equal(t, e.jaeger.srv.URL+"/trace/"+traceID, jaeger.Value)
	steps := text(t, ctx, chromedp.CSS(".steps tbody"))
	var statuses []string
	for _, line := range strings.Split(strings.TrimSpace(steps), "\n") {
		if f := strings.Fields(line); len(f) >= 4 {
			statuses = append(statuses, f[3]) // date, time, +gap, status, note
		}
	}
	require.Equal(t, []string{"PENDING", "QUEUED", "SENDING", "PENDING", "SENDING", "SENT"}, statuses, steps)
	for _, want := range []string{"accepted", "published", "attempt 1 ERROR TRANSIENT (503), retry", "attempt 2 SENT (200)"} {
		require.Contains(t, steps, want)
	}
	attempts := text(t, ctx, chromedp.CSS(".attempts tbody"))
	require.Contains(t, attempts, "TRANSIENT")
	require.Contains(t, attempts, "503")
	screenshot(t, ctx, "console-timeline.png")

	// The trace view of the same trace, from the fake Jaeger: the spans in tree order.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("trace-view")),
		chromedp.WaitVisible(chromedp.ID("spans")),
	))
	require.Equal(t, e.srv.URL+"/console/traces/"+traceID, location(t, ctx))
	ops, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#spans tbody tr")].map(r => r.dataset.depth + " " + r.querySelector("td.op").textContent)`))
	require.NoError(t, err)
	require.Equal(t, []string{"0 POST /api/notifications", "1 ingest.accept", "2 cdc publish", "3 dispatch.deliver",
		"4 dispatch.lease", "4 dispatch.send", "5 sms:twilio POST"}, ops)
	spans := text(t, ctx, chromedp.ID("spans"))
	require.Contains(t, spans, "herald.commit_lsn=0/1A2B3C4")
	require.Contains(t, spans, "herald-dispatch")
	require.NotContains(t, spans, piiPhone)
	screenshot(t, ctx, "console-trace.png")

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`header nav a[href="/console/lag"]`)),
		chromedp.WaitVisible(chromedp.ID("lanes")),
	))
	lanes := text(t, ctx, chromedp.ID("lanes"))
	for _, p := range []string{"HIGH", "NORMAL", "LOW", "herald-dispatch-high"} {
		require.Contains(t, lanes, p)
	}
	require.Contains(t, text(t, ctx, chromedp.ID("providers")), "sim-sms")
	screenshot(t, ctx, "console-lag.png")

	body := text(t, ctx, chromedp.CSS("body"))
	for _, pii := range []string{piiPhone, piiEmail, piiPayload, piiToken} {
		require.NotContains(t, body, pii)
	}
}
