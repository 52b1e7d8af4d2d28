package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/heraldtest"
)

// scrape reads serve's /metrics in the Prometheus text format.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	status, b, err := tryJSON(context.Background(), http.MethodGet, "http://"+addr+"/metrics", "", "", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(b)))
	require.NoError(t, err)
	return fams
}

// series returns the value of family's series whose labels include want (a counter's or
// gauge's value, a histogram's count), and whether there is one.
func series(fams map[string]*dto.MetricFamily, family string, want map[string]string) (float64, bool) {
	f, ok := fams[family]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsOfOneDelivery sends one HIGH OTP by SMS through the real pipeline and reads
// serve's /metrics: every series the alert rules of deploy/prometheus/ use is there, with
// the labels the rules select on.
func TestMetricsOfOneDelivery(t *testing.T) {
	o := sendOneOTP(t, nil)
	sms := map[string]string{"channel": "SMS", "priority": "HIGH"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range sms {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	type check struct {
		family string
		labels map[string]string
		ok     func(float64) bool
	}
	atLeastOne := func(v float64) bool { return v >= 1 }
	exactlyOne := func(v float64) bool { return v == 1 }
	zero := func(v float64) bool { return v == 0 }
	present := func(float64) bool { return true }
	checks := []check{
		// Final outcomes, once per delivery, apart from attempts.
		{"herald_deliveries_total", with(map[string]string{"outcome": "sent", "provider": "sms:twilio"}), exactlyOne},
		{"herald_dispatch_sends_total", with(map[string]string{"outcome": "SENT"}), exactlyOne},
		// The HIGH latency SLO: accept → provider call.
		{"herald_dispatch_accept_to_call_seconds", with(map[string]string{"provider": "sms:twilio"}), exactlyOne},
		// Provider calls by outcome.
		{"herald_provider_call_duration_seconds", map[string]string{"provider": "sms:twilio", "channel": "SMS", "outcome": "ok"}, exactlyOne},
		// Relay.
		{"herald_cdc_leader", nil, exactlyOne},
		{"herald_cdc_slot_lag_bytes", nil, present},
		{"herald_cdc_slot_flush_lag_seconds", nil, present},
		{"herald_cdc_commit_to_publish_seconds", map[string]string{"herald_priority": "HIGH"}, atLeastOne},
		// Dispatch.
		{"herald_dispatch_consumer_lag_records", map[string]string{"priority": "HIGH"}, zero},
		{"herald_dispatch_redis_degraded", nil, zero},
		// API RED metrics by route template, never by raw path.
		{"http_server_request_duration_seconds", map[string]string{"http_route": "/api/notifications",
			"http_request_method": "POST", "http_response_status_code": "202"}, exactlyOne},
		{"http_server_request_duration_seconds", map[string]string{"http_route": "/api/users/{userId}",
			"http_request_method": "PUT"}, exactlyOne},
	}
	var fams map[string]*dto.MetricFamily
	var failed []string
	defer func() {
		if t.Failed() {
			t.Logf("metrics not as expected:\n%s", strings.Join(failed, "\n"))
		}
	}()
	// Gauges are measured periodically (slot lag, consumer lag): wait for them.
	heraldtest.WaitFor(t, 30*time.Second, "every metric of the alert rules", func() bool {
		fams, failed = scrape(t, o.admin), nil
		for _, c := range checks {
			if v, ok := series(fams, c.family, c.labels); !ok || !c.ok(v) {
				failed = append(failed, fmt.Sprintf("%s%v = %v (present %v)", c.family, c.labels, v, ok))
			}
		}
		return len(failed) == 0
	})
	require.Empty(t, failed)
	// The HIGH latency SLO counts calls within 5 s: the histogram needs that bucket bound.
	var bounds []float64
	for _, b := range fams["herald_dispatch_accept_to_call_seconds"].GetMetric()[0].GetHistogram().GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	require.Contains(t, bounds, 5.0, "buckets of herald_dispatch_accept_to_call_seconds")
	for _, m := range fams["http_server_request_duration_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			require.NotContains(t, l.GetValue(), "/api/users/7", "label %s holds a raw path", l.GetName())
		}
	}
}
