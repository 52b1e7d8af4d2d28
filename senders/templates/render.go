package templates

import (
	"bytes"
	"encoding/json"
	"fmt"
	htemplate "html/template"
	"strings"
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
	weight  int            // estimated bytes of memory held, for the cache's budget
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
	return c.renderChain(locale, channel, data)
}

// RenderDecoded renders like Render with the payload already decoded, as Render decodes it:
// a JSON object read with json.Decoder.UseNumber into a map (numbers as json.Number; nil is
// {}). A caller that renders one payload for several channels decodes it once.
func RenderDecoded(content json.RawMessage, locale string, channel herald.Channel, payload map[string]any) (senders.Content, error) {
	c, err := cached(content)
	if err != nil {
		return senders.Content{}, err
	}
	if payload == nil {
		payload = map[string]any{}
	}
	return c.renderChain(locale, channel, payload)
}

// renderChain renders channel's content in the first locale of Chain(locale) that has it.
func (c *compiled) renderChain(locale string, channel herald.Channel, data any) (senders.Content, error) {
	b := newBudget()
	for _, name := range Chain(locale) {
		out, ok, err := c.render(channel, name, data, b)
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
func (c *compiled) render(channel herald.Channel, locale string, data any, b *budget) (out senders.Content, ok bool, err error) {
	field := string(channel) + "." + locale + "."
	switch channel {
	case herald.ChannelPush:
		p := c.push[locale]
		if p == nil {
			return out, false, nil
		}
		if out.Title, err = execText(p[0], data, field+"title", b); err == nil {
			out.Body, err = execText(p[1], data, field+"body", b)
		}
		out.Title = oneLine(out.Title)
	case herald.ChannelEmail:
		e := c.email[locale]
		if e == nil {
			return out, false, nil
		}
		out.Subject, err = execText(e.subject, data, field+"subject", b)
		out.Subject = oneLine(out.Subject)
		if err == nil && e.text != nil {
			out.Text, err = execText(e.text, data, field+"text", b)
		}
		if err == nil && e.html != nil {
			w := &writer{b: b}
			if xerr := e.html.Execute(w, data); xerr != nil {
				err = renderError(field+"html", xerr)
			}
			out.HTML = w.out.String()
		}
	case herald.ChannelSMS:
		t := c.sms[locale]
		if t == nil {
			return out, false, nil
		}
		out.Text, err = execText(t, data, field+"text", b)
	case herald.ChannelWebhook:
		w, found := c.webhook[locale]
		if !found {
			return out, false, nil
		}
		var v any
		if v, err = execJSON(w, data, field+"json", b); err == nil {
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
	if len(content) > MaxContentBytes {
		return nil, fmt.Errorf("%w: content is larger than %d bytes", ErrNotAllowed, MaxContentBytes)
	}
	c, err := decode(content)
	if err != nil {
		return nil, err
	}
	out := &compiled{
		push:    map[string]*[2]*ttemplate.Template{},
		email:   map[string]*compiledEmail{},
		sms:     map[string]*ttemplate.Template{},
		webhook: map[string]any{},
		weight:  len(content),
	}
	// parse parses one text template, keeping the first error.
	parse := func(field, text string) *ttemplate.Template {
		if err != nil {
			return nil
		}
		var t *ttemplate.Template
		t, err = out.text(field, text)
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
			ce.html, err = out.html(f+"html", e.HTML)
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
			out.webhook[loc], err = compileJSON(w.JSON, "WEBHOOK."+loc+".json", out.text)
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Estimated memory of a compiled template, in bytes, beyond its text: measured with
// TestCacheWeightCoversMemory.
const (
	templateWeight = 1536
	nodeWeight     = 96
)

// text parses, checks (limits.go) and meters (budget.go) one text/template.
func (c *compiled) text(field, text string) (*ttemplate.Template, error) {
	tree, nodes, err := parseText(field, text)
	if err != nil {
		return nil, err
	}
	meter(tree)
	c.weight += templateWeight + nodes*nodeWeight
	t, err := ttemplate.New(field).Option("missingkey=error").AddParseTree(field, tree)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, field, err)
	}
	return t, nil
}

// html is text for an html/template, whose escaping is added to the checked tree.
func (c *compiled) html(field, text string) (*htemplate.Template, error) {
	tree, nodes, err := parseText(field, text)
	if err != nil {
		return nil, err
	}
	meter(tree)
	c.weight += 2*templateWeight + 2*nodes*nodeWeight // the escaper adds to the tree
	t, err := htemplate.New(field).Option("missingkey=error").AddParseTree(field, tree)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, field, err)
	}
	return t, nil
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

// execText runs t with data, charging its output to b.
func execText(t *ttemplate.Template, data any, field string, b *budget) (string, error) {
	w := &writer{b: b}
	if err := t.Execute(w, data); err != nil {
		return "", renderError(field, err)
	}
	return w.out.String(), nil
}

func renderError(field string, err error) error {
	if overBudget(err) {
		return fmt.Errorf("%w: %s: %w", ErrRender, field, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrRender, field, err)
}

// oneLine folds line breaks (a subject or title is a single line).
func oneLine(s string) string { return strings.TrimSpace(lineBreaks.Replace(s)) }

// lineBreaks is oneLine's replacer, built once (a Replacer builds its tables on first use).
var lineBreaks = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ")
