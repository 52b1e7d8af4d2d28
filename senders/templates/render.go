package templates

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	htemplate "html/template"
	"strings"
	"sync"
	ttemplate "text/template"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

// compiled is a Content with every template parsed, per channel and locale.
type compiled struct {
	push    map[string]*[2]*ttemplate.Template // title, body
	email   map[string]*compiledEmail
	sms     map[string]*ttemplate.Template
	webhook map[string]any // decoded JSON whose strings are *ttemplate.Template
}

type compiledEmail struct {
	subject, text *ttemplate.Template
	html          *htemplate.Template
}

// Validate checks template content: strict JSON shape, a default locale per channel, valid
// locale tags, and every template parses. Errors wrap ErrInvalid and name the offending
// field ("EMAIL.ja.html").
func Validate(content json.RawMessage) error {
	_, err := compile(content)
	return err
}

// Channels returns the channels content has content for, in herald.Channels order, after
// validating it like Validate. Ingest can check them against the template's channels.
func Channels(content json.RawMessage) ([]herald.Channel, error) {
	c, err := cached(content)
	if err != nil {
		return nil, err
	}
	has := map[herald.Channel]bool{
		herald.ChannelPush: len(c.push) > 0, herald.ChannelEmail: len(c.email) > 0,
		herald.ChannelSMS: len(c.sms) > 0, herald.ChannelWebhook: len(c.webhook) > 0,
	}
	var out []herald.Channel
	for _, ch := range herald.Channels {
		if has[ch] {
			out = append(out, ch)
		}
	}
	return out, nil
}

// Render renders content for channel in locale (falling back along Chain(locale)) with
// payload (a JSON object, or empty) as the template data. Errors wrap ErrInvalid,
// ErrNoContent or ErrRender.
func Render(content json.RawMessage, locale string, channel herald.Channel, payload json.RawMessage) (senders.Content, error) {
	c, err := cached(content)
	if err != nil {
		return senders.Content{}, err
	}
	data, err := decodePayload(payload)
	if err != nil {
		return senders.Content{}, err
	}
	for _, name := range Chain(locale) {
		out, ok, err := c.render(channel, name, data)
		if err != nil {
			return senders.Content{}, err
		}
		if ok {
			return out, nil
		}
	}
	return senders.Content{}, fmt.Errorf("%w: %s", ErrNoContent, channel)
}

// render renders channel's content for exactly one locale; ok is false when it has none.
func (c *compiled) render(channel herald.Channel, locale string, data any) (out senders.Content, ok bool, err error) {
	field := string(channel) + "." + locale + "."
	switch channel {
	case herald.ChannelPush:
		p := c.push[locale]
		if p == nil {
			return out, false, nil
		}
		if out.Title, err = execText(p[0], data, field+"title"); err == nil {
			out.Body, err = execText(p[1], data, field+"body")
		}
		out.Title = oneLine(out.Title)
	case herald.ChannelEmail:
		e := c.email[locale]
		if e == nil {
			return out, false, nil
		}
		out.Subject, err = execText(e.subject, data, field+"subject")
		out.Subject = oneLine(out.Subject)
		if err == nil && e.text != nil {
			out.Text, err = execText(e.text, data, field+"text")
		}
		if err == nil && e.html != nil {
			var b bytes.Buffer
			if xerr := e.html.Execute(&b, data); xerr != nil {
				err = fmt.Errorf("%w: %s: %v", ErrRender, field+"html", xerr)
			}
			out.HTML = b.String()
		}
	case herald.ChannelSMS:
		t := c.sms[locale]
		if t == nil {
			return out, false, nil
		}
		out.Text, err = execText(t, data, field+"text")
	case herald.ChannelWebhook:
		w, found := c.webhook[locale]
		if !found {
			return out, false, nil
		}
		var v any
		if v, err = execJSON(w, data, field+"json"); err == nil {
			out.JSON, err = json.Marshal(v)
		}
	default:
		return out, false, nil
	}
	if err != nil {
		return senders.Content{}, true, err
	}
	return out, true, nil
}

func compile(content json.RawMessage) (*compiled, error) {
	c, err := decode(content)
	if err != nil {
		return nil, err
	}
	out := &compiled{
		push:    map[string]*[2]*ttemplate.Template{},
		email:   map[string]*compiledEmail{},
		sms:     map[string]*ttemplate.Template{},
		webhook: map[string]any{},
	}
	// parse parses one text template, keeping the first error.
	parse := func(field, text string) *ttemplate.Template {
		if err != nil {
			return nil
		}
		var t *ttemplate.Template
		if t, err = ttemplate.New(field).Option("missingkey=error").Parse(text); err != nil {
			err = fmt.Errorf("%w: %s: %v", ErrInvalid, field, err)
		}
		return t
	}
	for _, loc := range sortedKeys(c.Push) {
		p := c.Push[loc]
		f := "PUSH." + loc + "."
		out.push[loc] = &[2]*ttemplate.Template{parse(f+"title", p.Title), parse(f+"body", p.Body)}
	}
	for _, loc := range sortedKeys(c.Email) {
		e := c.Email[loc]
		f := "EMAIL." + loc + "."
		ce := &compiledEmail{subject: parse(f+"subject", e.Subject)}
		if e.Text != "" {
			ce.text = parse(f+"text", e.Text)
		}
		if e.HTML != "" && err == nil {
			if ce.html, err = htemplate.New(f + "html").Option("missingkey=error").Parse(e.HTML); err != nil {
				err = fmt.Errorf("%w: %shtml: %v", ErrInvalid, f, err)
			}
		}
		out.email[loc] = ce
	}
	for _, loc := range sortedKeys(c.SMS) {
		m := c.SMS[loc]
		out.sms[loc] = parse("SMS."+loc+".text", m.Text)
	}
	for _, loc := range sortedKeys(c.Webhook) {
		w := c.Webhook[loc]
		if err == nil {
			out.webhook[loc], err = compileJSON(w.JSON, "WEBHOOK."+loc+".json")
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// The compiled-template cache: dispatch renders the same few templates thousands of times a
// second. Keyed by the content's hash, bounded by clearing when full.
var cache = struct {
	sync.Mutex
	m map[[32]byte]*compiled
}{m: make(map[[32]byte]*compiled)}

const cacheMax = 1024

func cached(content json.RawMessage) (*compiled, error) {
	key := sha256.Sum256(content)
	cache.Lock()
	c := cache.m[key]
	cache.Unlock()
	if c != nil {
		return c, nil
	}
	c, err := compile(content)
	if err != nil {
		return nil, err
	}
	cache.Lock()
	if len(cache.m) >= cacheMax {
		clear(cache.m)
	}
	cache.m[key] = c
	cache.Unlock()
	return c, nil
}

func decodePayload(payload json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(payload)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber() // 1000000 stays 1000000, not 1e+06
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: payload is not JSON: %v", ErrRender, err)
	}
	if v == nil {
		return map[string]any{}, nil
	}
	return v, nil
}

func execText(t *ttemplate.Template, data any, field string) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrRender, field, err)
	}
	return b.String(), nil
}

// oneLine folds line breaks (a subject or title is a single line).
func oneLine(s string) string {
	return strings.TrimSpace(strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s))
}
