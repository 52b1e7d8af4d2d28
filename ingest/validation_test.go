package ingest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// validBody is a POST body that the validation env accepts; each case breaks one rule.
func validBody() map[string]any {
	return map[string]any{
		"userId":   42,
		"template": "otp",
		"channels": []string{"SMS"},
		"payload":  map[string]any{"code": "123456"},
	}
}

func with(k string, v any) func(map[string]any) {
	return func(m map[string]any) { m[k] = v }
}

func without(k string) func(map[string]any) {
	return func(m map[string]any) { delete(m, k) }
}

func nested(depth int) any {
	var v any = "leaf"
	for range depth {
		v = map[string]any{"x": v}
	}
	return v
}

// TestPostNotificationValidation checks every input rule of POST /api/notifications: the
// status, the problem code, the failing field, and that nothing was written.
func TestPostNotificationValidation(t *testing.T) {
	e := newEnv(t)
	e.template("otp", "security", "SMS", "EMAIL", "PUSH", "WEBHOOK")
	e.template("email_only", "news", "EMAIL")
	e.user(42, map[string]any{"phone": "+15551234567", "email": "a@example.com"})

	// The base request passes: the cases below fail for their own reason only.
	ok := e.post("base", validBody())
	require.Equal(t, http.StatusAccepted, ok.status, "%s", ok.body)
	n0, d0 := e.rows()

	bigPayload := map[string]any{"blob": strings.Repeat("x", 16<<10)}
	cases := []struct {
		name    string
		mutate  func(map[string]any) // applied to validBody
		raw     string               // body as-is instead of validBody
		headers map[string]string
		status  int
		code    string
		field   string
	}{
		{name: "missing idempotency key", headers: map[string]string{"Idempotency-Key": ""}, status: 400, code: codeValidationFailed, field: "Idempotency-Key"},
		{name: "idempotency key too long", headers: map[string]string{"Idempotency-Key": strings.Repeat("k", 101)}, status: 400, code: codeValidationFailed, field: "Idempotency-Key"},
		{name: "idempotency key not ASCII", headers: map[string]string{"Idempotency-Key": "schlüssel"}, status: 400, code: codeValidationFailed, field: "Idempotency-Key"},
		{name: "no content type", headers: map[string]string{"Content-Type": ""}, status: 415, code: codeUnsupportedMediaType},
		{name: "text content type", headers: map[string]string{"Content-Type": "text/plain"}, status: 415, code: codeUnsupportedMediaType},
		{name: "latin-1 charset", headers: map[string]string{"Content-Type": "application/json; charset=iso-8859-1"}, status: 415, code: codeUnsupportedMediaType},
		{name: "body over the limit", raw: `{"userId":42,"template":"otp","channels":["SMS"],"payload":{"x":"` + strings.Repeat("x", 64<<10) + `"}}`, status: 413, code: codeBodyTooLarge},
		{name: "malformed JSON", raw: `{"userId":`, status: 400, code: codeMalformedJSON},
		{name: "syntax error", raw: `{"userId":42,}`, status: 400, code: codeMalformedJSON},
		{name: "trailing data", raw: `{"userId":42,"template":"otp","channels":["SMS"]} {}`, status: 400, code: codeMalformedJSON},
		{name: "array body", raw: `[]`, status: 400, code: codeMalformedJSON},
		{name: "empty body", raw: ` `, status: 400, code: codeMalformedJSON},
		{name: "unknown field", mutate: with("userID2", 1), status: 400, code: codeUnknownField, field: "userID2"},
		{name: "unknown field in to", mutate: with("to", map[string]any{"fax": "1"}), status: 400, code: codeUnknownField, field: "fax"},
		{name: "userId missing", mutate: without("userId"), status: 400, code: codeValidationFailed, field: "userId"},
		{name: "userId null", mutate: with("userId", nil), status: 400, code: codeValidationFailed, field: "userId"},
		{name: "userId zero", mutate: with("userId", 0), status: 400, code: codeValidationFailed, field: "userId"},
		{name: "userId negative", mutate: with("userId", -7), status: 400, code: codeValidationFailed, field: "userId"},
		{name: "userId string", mutate: with("userId", "42"), status: 400, code: codeValidationFailed, field: "userId"},
		{name: "userId fraction", mutate: with("userId", 1.5), status: 400, code: codeValidationFailed, field: "userId"},
		{name: "userId overflow", raw: `{"userId":9223372036854775808,"template":"otp","channels":["SMS"]}`, status: 400, code: codeValidationFailed, field: "userId"},
		{name: "template missing", mutate: without("template"), status: 400, code: codeValidationFailed, field: "template"},
		{name: "template empty", mutate: with("template", ""), status: 400, code: codeValidationFailed, field: "template"},
		{name: "template bad characters", mutate: with("template", "o t p"), status: 400, code: codeValidationFailed, field: "template"},
		{name: "template too long", mutate: with("template", strings.Repeat("t", 101)), status: 400, code: codeValidationFailed, field: "template"},
		{name: "template unknown", mutate: with("template", "nope"), status: 422, code: codeUnknownTemplate},
		{name: "payload array", mutate: with("payload", []int{1}), status: 400, code: codeValidationFailed, field: "payload"},
		{name: "payload string", mutate: with("payload", "x"), status: 400, code: codeValidationFailed, field: "payload"},
		{name: "payload over 16 KiB", mutate: with("payload", bigPayload), status: 400, code: codeValidationFailed, field: "payload"},
		{name: "payload too deep", mutate: with("payload", nested(40)), status: 400, code: codeValidationFailed, field: "payload"},
		{name: "payload NUL character", mutate: with("payload", map[string]any{"a": "x\u0000y"}), status: 400, code: codeValidationFailed, field: "payload"},
		{name: "payload NUL in key", mutate: with("payload", map[string]any{"a\u0000": 1}), status: 400, code: codeValidationFailed, field: "payload"},
		{name: "payload huge exponent", raw: `{"userId":42,"template":"otp","channels":["SMS"],"payload":{"n":1e400}}`, status: 400, code: codeValidationFailed, field: "payload"},
		{name: "priority unknown", mutate: with("priority", "URGENT"), status: 400, code: codeValidationFailed, field: "priority"},
		{name: "priority lower case", mutate: with("priority", "high"), status: 400, code: codeValidationFailed, field: "priority"},
		{name: "priority empty", mutate: with("priority", ""), status: 400, code: codeValidationFailed, field: "priority"},
		{name: "channels missing", mutate: without("channels"), status: 400, code: codeValidationFailed, field: "channels"},
		{name: "channels empty", mutate: with("channels", []string{}), status: 400, code: codeValidationFailed, field: "channels"},
		{name: "channels not an array", mutate: with("channels", "SMS"), status: 400, code: codeValidationFailed, field: "channels"},
		{name: "channel unknown", mutate: with("channels", []string{"SMS", "FAX"}), status: 400, code: codeValidationFailed, field: "channels[1]"},
		{name: "channel repeated", mutate: with("channels", []string{"SMS", "SMS"}), status: 400, code: codeValidationFailed, field: "channels[1]"},
		{name: "channel unsupported by template", mutate: func(m map[string]any) { m["template"] = "email_only"; m["channels"] = []string{"SMS"} }, status: 400, code: codeValidationFailed, field: "channels"},
		{name: "category bad", mutate: with("category", "Marketing!"), status: 400, code: codeValidationFailed, field: "category"},
		{name: "category empty", mutate: with("category", ""), status: 400, code: codeValidationFailed, field: "category"},
		{name: "sendAt not RFC 3339", mutate: with("sendAt", "tomorrow"), status: 400, code: codeValidationFailed, field: "sendAt"},
		{name: "sendAt without zone", mutate: with("sendAt", "2030-01-02T15:04:05"), status: 400, code: codeValidationFailed, field: "sendAt"},
		{name: "expiresAt not RFC 3339", mutate: with("expiresAt", "2030-13-01T00:00:00Z"), status: 400, code: codeValidationFailed, field: "expiresAt"},
		{name: "expiresAt before sendAt", mutate: func(m map[string]any) { m["sendAt"] = "2030-01-02T00:00:00Z"; m["expiresAt"] = "2030-01-01T00:00:00Z" }, status: 400, code: codeValidationFailed, field: "expiresAt"},
		{name: "expiresAt equal to sendAt", mutate: func(m map[string]any) {
			m["sendAt"] = "2030-01-02T00:00:00Z"
			m["expiresAt"] = "2030-01-02T01:00:00+01:00"
		}, status: 400, code: codeValidationFailed, field: "expiresAt"},
		{name: "expiresAt in the past", mutate: with("expiresAt", "2001-01-01T00:00:00Z"), status: 400, code: codeValidationFailed, field: "expiresAt"},
		{name: "to.email invalid", mutate: with("to", map[string]any{"email": "not-an-address"}), status: 400, code: codeValidationFailed, field: "to.email"},
		{name: "to.email with display name", mutate: with("to", map[string]any{"email": "Bob <bob@example.com>"}), status: 400, code: codeValidationFailed, field: "to.email"},
		{name: "to.phone not E.164", mutate: with("to", map[string]any{"phone": "0301234567"}), status: 400, code: codeValidationFailed, field: "to.phone"},
		{name: "to.phone too long", mutate: with("to", map[string]any{"phone": "+1234567890123456"}), status: 400, code: codeValidationFailed, field: "to.phone"},
		{name: "to.webhookUrl not http", mutate: with("to", map[string]any{"webhookUrl": "ftp://example.com/x"}), status: 400, code: codeValidationFailed, field: "to.webhookUrl"},
		{name: "to.webhookUrl relative", mutate: with("to", map[string]any{"webhookUrl": "/hook"}), status: 400, code: codeValidationFailed, field: "to.webhookUrl"},
		{name: "to.pushTokens platform", mutate: with("to", map[string]any{"pushTokens": []map[string]any{{"token": "t1", "platform": "WNS"}}}), status: 400, code: codeValidationFailed, field: "to.pushTokens[0].platform"},
		{name: "to.pushTokens empty token", mutate: with("to", map[string]any{"pushTokens": []map[string]any{{"token": "", "platform": "FCM"}}}), status: 400, code: codeValidationFailed, field: "to.pushTokens[0].token"},
		{name: "to not an object", mutate: with("to", "+15551234567"), status: 400, code: codeValidationFailed, field: "to"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body any = tc.raw
			if tc.raw == "" {
				m := validBody()
				if tc.mutate != nil {
					tc.mutate(m)
				}
				body = m
			}
			headers := map[string]string{"Idempotency-Key": fmt.Sprintf("case-%d", i)}
			for k, v := range tc.headers {
				headers[k] = v
			}
			res := e.do(http.MethodPost, "/api/notifications", body, headers)
			p := requireProblem(t, res, tc.status, tc.code)
			if tc.field != "" {
				require.Contains(t, fields(p), tc.field, "body: %s", res.body)
			}
			n, d := e.rows()
			require.Equal(t, n0, n, "a rejected request wrote a notification")
			require.Equal(t, d0, d, "a rejected request wrote a delivery")
		})
	}
}

// fields lists the field names of a validation problem.
func fields(p map[string]any) []string {
	var out []string
	list, _ := p["errors"].([]any)
	for _, e := range list {
		out = append(out, e.(map[string]any)["field"].(string))
	}
	return out
}

// TestProfileValidation checks the input rules of the user, preference and template routes.
func TestProfileValidation(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name   string
		method string
		path   string
		body   any
		ctype  string
		status int
		code   string
		field  string
	}{
		{name: "user id not a number", path: "/api/users/abc", body: map[string]any{}, status: 400, code: codeValidationFailed, field: "userId"},
		{name: "user id zero", path: "/api/users/0", body: map[string]any{}, status: 400, code: codeValidationFailed, field: "userId"},
		{name: "user email", path: "/api/users/1", body: map[string]any{"email": "x@"}, status: 400, code: codeValidationFailed, field: "email"},
		{name: "user phone", path: "/api/users/1", body: map[string]any{"phone": "+0123"}, status: 400, code: codeValidationFailed, field: "phone"},
		{name: "user webhook", path: "/api/users/1", body: map[string]any{"webhookUrl": "https://user:pw@example.com/"}, status: 400, code: codeValidationFailed, field: "webhookUrl"},
		{name: "user locale", path: "/api/users/1", body: map[string]any{"locale": "not a locale"}, status: 400, code: codeValidationFailed, field: "locale"},
		{name: "user time zone", path: "/api/users/1", body: map[string]any{"timeZone": "Mars/Olympus_Mons"}, status: 400, code: codeValidationFailed, field: "timeZone"},
		{name: "user time zone Local", path: "/api/users/1", body: map[string]any{"timeZone": "Local"}, status: 400, code: codeValidationFailed, field: "timeZone"},
		{name: "user time zone path", path: "/api/users/1", body: map[string]any{"timeZone": "../../etc/passwd"}, status: 400, code: codeValidationFailed, field: "timeZone"},
		{name: "user push platform", path: "/api/users/1", body: map[string]any{"pushTokens": []map[string]any{{"token": "a", "platform": "X"}}}, status: 400, code: codeValidationFailed, field: "pushTokens[0].platform"},
		{name: "user push token repeated", path: "/api/users/1", body: map[string]any{"pushTokens": []map[string]any{{"token": "a", "platform": "FCM"}, {"token": "a", "platform": "APNS"}}}, status: 400, code: codeValidationFailed, field: "pushTokens[1].token"},
		{name: "user unknown field", path: "/api/users/1", body: map[string]any{"fax": "1"}, status: 400, code: codeUnknownField, field: "fax"},
		{name: "user content type", path: "/api/users/1", body: map[string]any{}, ctype: "text/plain", status: 415, code: codeUnsupportedMediaType},
		{name: "opt-out channel", path: "/api/users/1/preferences", body: map[string]any{"optOuts": []map[string]any{{"channel": "FAX"}}}, status: 400, code: codeValidationFailed, field: "optOuts[0].channel"},
		{name: "opt-out category", path: "/api/users/1/preferences", body: map[string]any{"optOuts": []map[string]any{{"channel": "SMS", "category": "Bad Category"}}}, status: 400, code: codeValidationFailed, field: "optOuts[0].category"},
		{name: "quiet start", path: "/api/users/1/preferences", body: map[string]any{"quietHours": map[string]any{"start": "25:00", "end": "07:00"}}, status: 400, code: codeValidationFailed, field: "quietHours.start"},
		{name: "quiet end", path: "/api/users/1/preferences", body: map[string]any{"quietHours": map[string]any{"start": "22:00", "end": "7:00"}}, status: 400, code: codeValidationFailed, field: "quietHours.end"},
		{name: "quiet empty window", path: "/api/users/1/preferences", body: map[string]any{"quietHours": map[string]any{"start": "22:00", "end": "22:00"}}, status: 400, code: codeValidationFailed, field: "quietHours.end"},
		{name: "preferences unknown field", path: "/api/users/1/preferences", body: map[string]any{"doNotDisturb": true}, status: 400, code: codeUnknownField, field: "doNotDisturb"},
		{name: "template name", path: "/api/templates/bad%20name", body: map[string]any{"category": "x", "channels": []string{"SMS"}}, status: 400, code: codeValidationFailed, field: "name"},
		{name: "template category missing", path: "/api/templates/t1", body: map[string]any{"channels": []string{"SMS"}}, status: 400, code: codeValidationFailed, field: "category"},
		{name: "template channels empty", path: "/api/templates/t1", body: map[string]any{"category": "x", "channels": []string{}}, status: 400, code: codeValidationFailed, field: "channels"},
		{name: "template channel unknown", path: "/api/templates/t1", body: map[string]any{"category": "x", "channels": []string{"FAX"}}, status: 400, code: codeValidationFailed, field: "channels[0]"},
		{name: "template content array", path: "/api/templates/t1", body: map[string]any{"category": "x", "channels": []string{"SMS"}, "content": []int{1}}, status: 400, code: codeValidationFailed, field: "content"},
		{name: "template unknown field", path: "/api/templates/t1", body: map[string]any{"category": "x", "channels": []string{"SMS"}, "body": "hi"}, status: 400, code: codeUnknownField, field: "body"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			headers := map[string]string{}
			if tc.ctype != "" {
				headers["Content-Type"] = tc.ctype
			}
			res := e.do(http.MethodPut, tc.path, tc.body, headers)
			p := requireProblem(t, res, tc.status, tc.code)
			if tc.field != "" {
				require.Contains(t, fields(p), tc.field, "body: %s", res.body)
			}
			var rows int
			require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT
				(SELECT count(*) FROM user_contact) + (SELECT count(*) FROM push_token) +
				(SELECT count(*) FROM user_preference) + (SELECT count(*) FROM template)`).Scan(&rows))
			require.Zero(t, rows, "a rejected request wrote a row")
		})
	}
}
