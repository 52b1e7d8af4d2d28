package templates

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

const otp = `{
  "PUSH": {
    "default": {"title": "Your code", "body": "Code {{.code}} for {{.user.name}}"},
    "ja":      {"title": "コード", "body": "{{.code}}"}
  },
  "EMAIL": {
    "default": {"subject": "Code {{.code}}\r\nBcc: x@y", "text": "Code {{.code}}", "html": "<p>Hello {{.user.name}}</p>"}
  },
  "SMS": {
    "default": {"text": "Your code is {{.code}}"},
    "ja":      {"text": "認証コード: {{.code}}"},
    "ja-JP":   {"text": "【JP】認証コード: {{.code}}"}
  },
  "webhook": {
    "default": {"json": {"event": "otp", "code": "{{.code}}", "n": 1000000, "ok": true, "tags": ["{{.user.name}}", null]}}
  }
}`

const payload = `{"code": "493817", "user": {"name": "<b>Ada</b> \"quoted\""}}`

func TestChain(t *testing.T) {
	require.Equal(t, []string{"ja-jp", "ja", "default"}, Chain("ja-JP"))
	require.Equal(t, []string{"zh-hant-tw", "zh-hant", "zh", "default"}, Chain("zh_Hant_TW"))
	require.Equal(t, []string{"default"}, Chain(""))
	require.Equal(t, []string{"default"}, Chain("default"))
}

func TestRenderLocaleFallback(t *testing.T) {
	for _, tc := range []struct {
		locale  string
		channel herald.Channel
		want    string
	}{
		{"ja-JP", herald.ChannelSMS, "【JP】認証コード: 493817"},
		{"ja-jp", herald.ChannelSMS, "【JP】認証コード: 493817"},
		{"ja", herald.ChannelSMS, "認証コード: 493817"},
		{"ja-KR", herald.ChannelSMS, "認証コード: 493817"},
		{"fr-FR", herald.ChannelSMS, "Your code is 493817"},
		{"", herald.ChannelSMS, "Your code is 493817"},
		{"ja-JP", herald.ChannelPush, "493817"},       // ja-JP has no push: ja's
		{"ja-JP", herald.ChannelEmail, "Code 493817"}, // neither has email: default's
	} {
		c, err := Render(json.RawMessage(otp), tc.locale, tc.channel, json.RawMessage(payload))
		require.NoError(t, err, tc.locale)
		got := c.Text
		if tc.channel == herald.ChannelPush {
			got = c.Body
		}
		require.Equal(t, tc.want, got, "%s %s", tc.locale, tc.channel)
	}
}

func TestRenderChannels(t *testing.T) {
	email, err := Render(json.RawMessage(otp), "en", herald.ChannelEmail, json.RawMessage(payload))
	require.NoError(t, err)
	require.Equal(t, "Code 493817 Bcc: x@y", email.Subject, "line breaks folded: no header injection")
	require.Equal(t, "<p>Hello &lt;b&gt;Ada&lt;/b&gt; &#34;quoted&#34;</p>", email.HTML, "payload escaped in HTML")

	push, err := Render(json.RawMessage(otp), "en", herald.ChannelPush, json.RawMessage(payload))
	require.NoError(t, err)
	require.Equal(t, "Your code", push.Title)
	require.Equal(t, `Code 493817 for <b>Ada</b> "quoted"`, push.Body, "text parts are not HTML-escaped")

	hook, err := Render(json.RawMessage(otp), "en", herald.ChannelWebhook, json.RawMessage(payload))
	require.NoError(t, err)
	require.JSONEq(t, `{"event":"otp","code":"493817","n":1000000,"ok":true,"tags":["<b>Ada</b> \"quoted\"",null]}`, string(hook.JSON))
	require.Contains(t, string(hook.JSON), `1000000`)
}

// TestRenderDecodedRendersAsRender holds that a payload decoded once (ingest's render check)
// renders every channel as the bytes do, numbers included, and that nil is the empty object.
func TestRenderDecodedRendersAsRender(t *testing.T) {
	content := json.RawMessage(`{"SMS": {"default": {"text": "{{.code}} {{.n}} {{.user.name}}"}},
		"webhook": {"default": {"json": {"n": "{{.n}}", "user": "{{.user.name}}"}}}}`)
	raw := json.RawMessage(`{"code": "493817", "n": 1000000, "user": {"name": "<b>Ada</b>"}}`)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var decoded map[string]any
	require.NoError(t, dec.Decode(&decoded))
	for _, ch := range []herald.Channel{herald.ChannelSMS, herald.ChannelWebhook} {
		want, err := Render(content, "de", ch, raw)
		require.NoError(t, err)
		got, err := RenderDecoded(content, "de", ch, decoded)
		require.NoError(t, err)
		require.Equal(t, want, got, ch)
	}
	got, err := RenderDecoded(content, "", herald.ChannelSMS, map[string]any{"code": "1", "n": json.Number("1e6"), "user": map[string]any{"name": "x"}})
	require.NoError(t, err)
	require.Equal(t, "1 1e6 x", got.Text, "a json.Number keeps its text")

	_, err = RenderDecoded(json.RawMessage(otp), "en", herald.ChannelSMS, nil)
	require.ErrorIs(t, err, ErrRender, "nil is {}: the key is missing")
	_, err = RenderDecoded(json.RawMessage(`{"SMS": 1}`), "en", herald.ChannelSMS, decoded)
	require.ErrorIs(t, err, ErrInvalid)
}

func TestRenderErrors(t *testing.T) {
	_, err := Render(json.RawMessage(otp), "en", herald.ChannelSMS, json.RawMessage(`{"other": 1}`))
	require.ErrorIs(t, err, ErrRender, "missing key")
	require.Contains(t, err.Error(), "SMS.default.text")

	_, err = Render(json.RawMessage(otp), "en", herald.ChannelSMS, nil)
	require.ErrorIs(t, err, ErrRender, "missing key with no payload")

	_, err = Render(json.RawMessage(otp), "en", herald.ChannelSMS, json.RawMessage(`{`))
	require.ErrorIs(t, err, ErrRender)

	_, err = Render(json.RawMessage(`{"SMS":{"default":{"text":"hi"}}}`), "en", herald.ChannelEmail, nil)
	require.ErrorIs(t, err, ErrNoContent)

	_, err = Render(json.RawMessage(`{"EMAIL":{"default":{"subject":"s","html":"<a href=\"{{.url}}\">x</a>"}}}`),
		"en", herald.ChannelEmail, json.RawMessage(`{"url":"javascript:alert(1)"}`))
	require.NoError(t, err)
}

func TestHTMLUnsafeURLIsFiltered(t *testing.T) {
	c, err := Render(json.RawMessage(`{"EMAIL":{"default":{"subject":"s","html":"<a href=\"{{.url}}\">x</a>"}}}`),
		"en", herald.ChannelEmail, json.RawMessage(`{"url":"javascript:alert(1)"}`))
	require.NoError(t, err)
	require.Contains(t, c.HTML, "#ZgotmplZ")
}

func TestChannels(t *testing.T) {
	chs, err := Channels(json.RawMessage(otp))
	require.NoError(t, err)
	require.Equal(t, []herald.Channel{herald.ChannelPush, herald.ChannelEmail, herald.ChannelSMS, herald.ChannelWebhook}, chs)
	chs, err = Channels(json.RawMessage(`{"sms":{"default":{"text":"x"}}}`))
	require.NoError(t, err)
	require.Equal(t, []herald.Channel{herald.ChannelSMS}, chs)
	_, err = Channels(json.RawMessage(`{}`))
	require.ErrorIs(t, err, ErrInvalid)
}

func TestValidate(t *testing.T) {
	require.NoError(t, Validate(json.RawMessage(otp)))
	for name, content := range map[string]string{
		"not json":        `{`,
		"not an object":   `[]`,
		"no channel":      `{}`,
		"no default":      `{"SMS":{"en":{"text":"x"}}}`,
		"unknown channel": `{"FAX":{"default":{"text":"x"}}}`,
		"channel twice":   `{"SMS":{"default":{"text":"x"}},"sms":{"default":{"text":"y"}}}`,
		"unknown field":   `{"SMS":{"default":{"text":"x","from":"y"}}}`,
		"wrong field":     `{"SMS":{"default":{"title":"x"}}}`,
		"bad tag":         `{"SMS":{"default":{"text":"x"},"not a tag":{"text":"y"}}}`,
		"duplicate tag":   `{"SMS":{"default":{"text":"x"},"ja-JP":{"text":"y"},"ja-jp":{"text":"z"}}}`,
		"text syntax":     `{"SMS":{"default":{"text":"{{.code"}}}`,
		"undefined func":  `{"SMS":{"default":{"text":"{{code}}"}}}`,
		"html syntax":     `{"EMAIL":{"default":{"subject":"s","html":"{{if .x}}"}}}`,
		"webhook syntax":  `{"WEBHOOK":{"default":{"json":{"a":["{{end}}"]}}}}`,
		"email no body":   `{"EMAIL":{"default":{"subject":"s"}}}`,
		"webhook no json": `{"WEBHOOK":{"default":{}}}`,
		"webhook null":    `{"WEBHOOK":{"default":{"json":null}}}`,
		"trailing data":   `{"SMS":{"default":{"text":"x"}}} {}`,
		"null locale":     `{"SMS":{"default":null}}`,
		"empty sms":       `{"SMS":{"default":{"text":""}}}`,
		"empty push":      `{"PUSH":{"default":{}}}`,
	} {
		require.ErrorIs(t, Validate(json.RawMessage(content)), ErrInvalid, name)
	}
}

// fuzzSeeds are template texts for the fuzz tests: everyday ones and the refused ones.
var fuzzSeeds = []string{
	bomb,
	`{{.a}}`,
	`{{range .a}}{{range $.a}}{{$}}{{end}}{{end}}`,
	`{{range $i, $e := .a}}{{printf "%5d %.2f" $i $e}}{{end}}`,
	`{{with .a}}{{range .}}{{if eq . "x"}}{{break}}{{end}}{{.}}{{end}}{{else}}none{{end}}`,
	`{{$x := .a}}{{range $x}}{{$x = .}}{{end}}`,
	`{{printf "%*d" 900000000 0}}`,
	`{{define "x"}}{{template "x"}}{{end}}{{template "x"}}`,
}

// FuzzValidate checks the property that makes templates safe: content Validate accepts
// renders, with any payload, without panicking and within the output limit.
func FuzzValidate(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, `{"a":[1,2,"x",{"b":[3]}],"n":9000000000000000000}`)
	}
	f.Fuzz(func(t *testing.T, text, data string) {
		content := sms(text)
		if Validate(content) != nil {
			return
		}
		c, err := Render(content, "", herald.ChannelSMS, json.RawMessage(data))
		if err == nil {
			require.LessOrEqual(t, len(c.Text), MaxOutputBytes)
		}
	})
}

func FuzzRender(f *testing.F) {
	f.Add(otp, "ja-JP", payload)
	f.Add(`{"SMS":{"default":{"text":"{{.a}}"}}}`, "en", `{"a":1}`)
	for _, s := range fuzzSeeds {
		f.Add(string(sms(s)), "", `{"a":[1,2,3]}`)
	}
	f.Fuzz(func(t *testing.T, content, locale, data string) {
		for _, ch := range herald.Channels {
			c, err := Render(json.RawMessage(content), locale, ch, json.RawMessage(data))
			if err != nil {
				continue
			}
			require.LessOrEqual(t, len(c.Title)+len(c.Body)+len(c.Subject)+len(c.Text)+len(c.HTML), MaxOutputBytes)
			if ch == herald.ChannelWebhook {
				require.True(t, json.Valid(c.JSON))
			}
		}
	})
}

// BenchmarkRender measures a cached render (what dispatch pays per delivery).
func BenchmarkRender(b *testing.B) {
	content, data := json.RawMessage(otp), json.RawMessage(payload)
	for _, ch := range []herald.Channel{herald.ChannelSMS, herald.ChannelEmail, herald.ChannelWebhook} {
		b.Run(string(ch), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Render(content, "ja-JP", ch, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
