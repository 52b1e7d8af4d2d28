package ingest

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

func sms(text string) map[string]any { return map[string]any{"text": text} }

// TestPutTemplateContent checks that PUT /api/templates validates content with the template
// engine: each refused case answers 400 invalid_template naming the fault and stores nothing.
func TestPutTemplateContent(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name     string
		channels []string
		content  any
		status   int
		message  string // part of the validator's message
	}{
		{name: "empty content is the fallback", channels: []string{"SMS", "EMAIL"}, content: map[string]any{}, status: 200},
		{name: "absent content is the fallback", channels: []string{"SMS"}, status: 200},
		{name: "locales", channels: []string{"SMS"}, content: map[string]any{"SMS": map[string]any{"default": sms("{{.code}}"), "ja-JP": sms("コード {{.code}}")}}, status: 200},
		{name: "webhook listed without content", channels: []string{"SMS", "WEBHOOK"}, content: map[string]any{"SMS": map[string]any{"default": sms("hi")}}, status: 200},
		{name: "syntax error", channels: []string{"SMS"}, content: map[string]any{"SMS": map[string]any{"default": sms("{{.code")}}, status: 400, message: "SMS.default.text"},
		{name: "html syntax error", channels: []string{"EMAIL"}, content: map[string]any{"EMAIL": map[string]any{"default": map[string]any{"subject": "s", "html": "<b>{{if}}</b>"}}}, status: 400, message: "EMAIL.default.html"},
		{name: "no default locale", channels: []string{"SMS"}, content: map[string]any{"SMS": map[string]any{"en": sms("hi")}}, status: 400, message: "SMS.default is required"},
		{name: "bad locale tag", channels: []string{"SMS"}, content: map[string]any{"SMS": map[string]any{"default": sms("hi"), "not a tag": sms("hi")}}, status: 400, message: "not a BCP 47"},
		{name: "unknown channel", channels: []string{"SMS"}, content: map[string]any{"FAX": map[string]any{"default": sms("hi")}}, status: 400, message: `"FAX" is not a channel`},
		{name: "unknown member", channels: []string{"SMS"}, content: map[string]any{"SMS": map[string]any{"default": map[string]any{"body": "hi"}}}, status: 400, message: "SMS.default"},
		{name: "email without text or html", channels: []string{"EMAIL"}, content: map[string]any{"EMAIL": map[string]any{"default": map[string]any{"subject": "s"}}}, status: 400, message: "needs text or html"},
		{name: "content for an unlisted channel", channels: []string{"SMS"}, content: map[string]any{"SMS": map[string]any{"default": sms("hi")}, "PUSH": map[string]any{"default": map[string]any{"body": "hi"}}}, status: 400, message: "PUSH: content for a channel that channels does not list"},
		{name: "listed channel without content", channels: []string{"SMS", "EMAIL"}, content: map[string]any{"SMS": map[string]any{"default": sms("hi")}}, status: 400, message: "EMAIL: listed in channels but has no content"},
		{name: "content not channels", channels: []string{"SMS"}, content: map[string]any{"SMS": "hi"}, status: 400},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("t%d", i)
			body := map[string]any{"category": "x", "channels": tc.channels}
			if tc.content != nil {
				body["content"] = tc.content
			}
			res := e.do(http.MethodPut, "/api/templates/"+name, body, nil)
			var stored int
			require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM template WHERE name = $1`, name).Scan(&stored))
			if tc.status == http.StatusOK {
				require.Equal(t, http.StatusOK, res.status, "%s", res.body)
				require.Equal(t, 1, stored)
				return
			}
			p := requireProblem(t, res, tc.status, codeInvalidTemplate)
			require.Equal(t, []string{"content"}, fields(p), "body: %s", res.body)
			require.Contains(t, p["detail"], tc.message)
			require.Zero(t, stored, "a refused template was stored")
		})
	}

	// A refused replacement keeps the stored template.
	e.templateWith("keep", "x", map[string]any{"SMS": map[string]any{"default": sms("v1")}}, "SMS")
	res := e.do(http.MethodPut, "/api/templates/keep", map[string]any{
		"category": "x", "channels": []string{"SMS"}, "content": map[string]any{"SMS": map[string]any{"default": sms("{{")}},
	}, nil)
	requireProblem(t, res, http.StatusBadRequest, codeInvalidTemplate)
	got := e.do(http.MethodGet, "/api/templates/keep", nil, nil).json(t)
	require.Equal(t, map[string]any{"SMS": map[string]any{"default": sms("v1")}}, got["content"])
}

// TestPostRendersTemplate checks that POST /api/notifications renders the template for every
// delivery channel with the payload and the user's stored locale: a failure answers 422
// template_render_failed and writes nothing.
func TestPostRendersTemplate(t *testing.T) {
	e := newEnv(t)
	e.templateWith("order", "orders", map[string]any{
		"SMS":   map[string]any{"default": sms("Order {{.order.id}} shipped"), "de": sms("Bestellung {{.order.id}} von {{.shop}}")},
		"EMAIL": map[string]any{"default": map[string]any{"subject": "Order {{.order.id}}", "html": "<b>{{.order.id}}</b>"}},
		"PUSH":  map[string]any{"default": map[string]any{"title": "Order", "body": "{{.pushOnly}}"}},
	}, "SMS", "EMAIL", "PUSH", "WEBHOOK")
	e.templateWith("plain", "orders", map[string]any{}, "SMS", "EMAIL")
	e.user(1, map[string]any{"phone": "+15551230001", "email": "a@example.com", "webhookUrl": "https://example.com/h"})
	e.user(2, map[string]any{"phone": "+15551230002", "locale": "de-DE"})
	_, err := e.pool.Exec(context.Background(), `INSERT INTO template (name, category, channels, content)
		VALUES ('legacy', 'x', '{SMS}', '{"body": "stored before content was validated"}')`)
	require.NoError(t, err)

	order := map[string]any{"order": map[string]any{"id": 7}, "secret": "s3cr3t-value"}
	cases := []struct {
		name       string
		user       int
		template   string
		channels   []string
		payload    any
		status     int
		field      string
		deliveries int
	}{
		{name: "valid", user: 1, template: "order", channels: []string{"SMS", "EMAIL"}, payload: order, status: 202, deliveries: 2},
		{name: "webhook without content is the envelope", user: 1, template: "order", channels: []string{"WEBHOOK"}, payload: order, status: 202, deliveries: 1},
		{name: "suppressed channel is not rendered", user: 1, template: "order", channels: []string{"SMS", "PUSH"}, payload: order, status: 202, deliveries: 1},
		{name: "empty content renders anything", user: 1, template: "plain", channels: []string{"SMS", "EMAIL"}, status: 202, deliveries: 2},
		{name: "missing variable", user: 1, template: "order", channels: []string{"SMS"}, payload: map[string]any{"secret": "s3cr3t-value"}, status: 422, field: "payload"},
		{name: "missing variable in one channel", user: 1, template: "order", channels: []string{"SMS", "EMAIL"}, payload: map[string]any{"shop": "x"}, status: 422, field: "payload"},
		{name: "wrong payload type", user: 1, template: "order", channels: []string{"EMAIL"}, payload: map[string]any{"order": "s3cr3t-value"}, status: 422, field: "payload"},
		{name: "no payload", user: 1, template: "order", channels: []string{"SMS"}, status: 422, field: "payload"},
		{name: "user locale needs another variable", user: 2, template: "order", channels: []string{"SMS"}, payload: order, status: 422, field: "payload"},
		{name: "user locale with its variable", user: 2, template: "order", channels: []string{"SMS"}, payload: map[string]any{"order": map[string]any{"id": 7}, "shop": "Acme"}, status: 202, deliveries: 1},
		{name: "content stored unvalidated", user: 1, template: "legacy", channels: []string{"SMS"}, status: 422, field: "template"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n0, d0 := e.rows()
			body := map[string]any{"userId": tc.user, "template": tc.template, "channels": tc.channels}
			if tc.payload != nil {
				body["payload"] = tc.payload
			}
			res := e.post(fmt.Sprintf("render-%d", i), body)
			n, d := e.rows()
			if tc.status == http.StatusAccepted {
				require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
				require.Len(t, res.json(t)["deliveries"], tc.deliveries)
				require.Equal(t, n0+1, n)
				require.Equal(t, d0+tc.deliveries, d)
				return
			}
			p := requireProblem(t, res, tc.status, codeTemplateRenderFailed)
			require.Equal(t, []string{tc.field}, fields(p), "body: %s", res.body)
			require.NotContains(t, string(res.body), "s3cr3t-value", "payload data in the answer")
			require.Equal(t, n0, n, "a refused request wrote a notification")
			require.Equal(t, d0, d, "a refused request wrote a delivery")
		})
	}
}

// BenchmarkCheckRender measures the render check a POST adds: two channels of a cached
// template with one variable each. Run: go test -run '^$' -bench BenchmarkCheckRender ./ingest
func BenchmarkCheckRender(b *testing.B) {
	content := []byte(`{"EMAIL": {"default": {"subject": "Your code", "text": "Your code is {{.code}}"}}, "SMS": {"default": {"text": "Your code is {{.code}}"}}}`)
	payload := map[string]any{"code": "123456"} // as normalizeObject decodes it
	deliver := []herald.Channel{herald.ChannelSMS, herald.ChannelEmail}
	b.ReportAllocs()
	for b.Loop() {
		if err := checkRender(content, "de-DE", deliver, payload); err != nil {
			b.Fatal(err)
		}
	}
}
