// Package templates validates and renders notification templates: per template, content per
// channel (push title/body, email subject/text/html, sms text, webhook json) and per locale,
// with a fallback chain from the most specific locale to "default" (ja-JP → ja → default).
//
// Text parts are rendered with text/template, the e-mail HTML part with html/template (so
// payload values are escaped); a payload key the template uses but the payload lacks is an
// error (missingkey=error), so ingest can refuse the notification with 422 instead of
// sending a broken message. The JSON shape is documented in docs/senders.md.
package templates

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/heraldhq/herald"
)

// DefaultLocale is the locale every chain ends in. Every channel of a template must have it.
const DefaultLocale = "default"

// Errors callers branch on. Errors returned by Validate and Render wrap one of them.
var (
	// ErrInvalid: the template content is malformed (bad JSON, unknown field, template
	// syntax error, no default locale).
	ErrInvalid = errors.New("invalid template content")
	// ErrNoContent: no locale in the chain has content for the channel.
	ErrNoContent = errors.New("template has no content for this channel")
	// ErrRender: the template failed on this payload (a missing key, a wrong type).
	ErrRender = errors.New("template cannot be rendered with this payload")
)

// Content is the stored template content (the template.content column): for each channel,
// its content per locale.
//
//	{"SMS": {"default": {"text": "..."}, "ja": {...}}, "EMAIL": {"default": {...}}, ...}
type Content struct {
	Push    map[string]*Push
	Email   map[string]*Email
	SMS     map[string]*SMS
	Webhook map[string]*Webhook
}

// Push is push-notification content.
type Push struct {
	Title string `json:"title"`
	Body  string `json:"body"`
}

// Email is e-mail content. At least one of Text and HTML is required.
type Email struct {
	Subject string `json:"subject"`
	Text    string `json:"text,omitempty"`
	HTML    string `json:"html,omitempty"`
}

// SMS is SMS content.
type SMS struct {
	Text string `json:"text"`
}

// Webhook is webhook content: any JSON value; every string in it is a text template.
type Webhook struct {
	JSON json.RawMessage `json:"json"`
}

var localeTag = regexp.MustCompile(`^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$`)

// strict decodes raw into v, refusing unknown fields and trailing data.
func strict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// decode parses raw strictly. Channel keys are herald channels (PUSH, EMAIL, SMS, WEBHOOK,
// matched case-insensitively); every channel needs a "default" locale; locale keys are
// BCP 47 tags, stored lower-cased.
func decode(raw json.RawMessage) (*Content, error) {
	var byChannel map[string]map[string]json.RawMessage
	if err := strict(raw, &byChannel); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(byChannel) == 0 {
		return nil, fmt.Errorf("%w: no channel", ErrInvalid)
	}
	c := &Content{}
	seen := map[herald.Channel]bool{}
	for _, key := range sortedKeys(byChannel) {
		ch, err := herald.ParseChannel(strings.ToUpper(key))
		if err != nil {
			return nil, fmt.Errorf("%w: %q is not a channel", ErrInvalid, key)
		}
		if seen[ch] {
			return nil, fmt.Errorf("%w: %s given twice", ErrInvalid, ch)
		}
		seen[ch] = true
		locales := byChannel[key]
		if locales[DefaultLocale] == nil {
			return nil, fmt.Errorf("%w: %s.%s is required", ErrInvalid, ch, DefaultLocale)
		}
		for _, name := range sortedKeys(locales) {
			field := string(ch) + "." + name
			if name != DefaultLocale && !localeTag.MatchString(name) {
				return nil, fmt.Errorf("%w: %s: not a BCP 47 language tag", ErrInvalid, field)
			}
			if err := c.add(ch, strings.ToLower(name), locales[name]); err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, field, err)
			}
		}
	}
	return c, nil
}

// add decodes one channel's content for one locale.
func (c *Content) add(ch herald.Channel, locale string, raw json.RawMessage) error {
	dup := errors.New("locale given twice (tags are case-insensitive)")
	if string(bytes.TrimSpace(raw)) == "null" {
		return errors.New("is null")
	}
	switch ch {
	case herald.ChannelPush:
		var v Push
		if err := strict(raw, &v); err != nil {
			return err
		}
		if v.Title == "" && v.Body == "" {
			return errors.New("needs title or body")
		}
		if c.Push == nil {
			c.Push = map[string]*Push{}
		}
		if c.Push[locale] != nil {
			return dup
		}
		c.Push[locale] = &v
	case herald.ChannelEmail:
		var v Email
		if err := strict(raw, &v); err != nil {
			return err
		}
		if v.Text == "" && v.HTML == "" {
			return errors.New("needs text or html")
		}
		if c.Email == nil {
			c.Email = map[string]*Email{}
		}
		if c.Email[locale] != nil {
			return dup
		}
		c.Email[locale] = &v
	case herald.ChannelSMS:
		var v SMS
		if err := strict(raw, &v); err != nil {
			return err
		}
		if v.Text == "" {
			return errors.New("needs text")
		}
		if c.SMS == nil {
			c.SMS = map[string]*SMS{}
		}
		if c.SMS[locale] != nil {
			return dup
		}
		c.SMS[locale] = &v
	case herald.ChannelWebhook:
		var v Webhook
		if err := strict(raw, &v); err != nil {
			return err
		}
		if len(v.JSON) == 0 || !json.Valid(v.JSON) || string(v.JSON) == "null" {
			return errors.New("json must be a JSON value")
		}
		if c.Webhook == nil {
			c.Webhook = map[string]*Webhook{}
		}
		if c.Webhook[locale] != nil {
			return dup
		}
		c.Webhook[locale] = &v
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Chain returns the locales tried for locale, most specific first: "ja-JP" gives
// ["ja-jp", "ja", "default"]. Underscores are read as hyphens; matching ignores case.
func Chain(locale string) []string {
	tag := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(locale), "_", "-"))
	var chain []string
	for tag != "" && tag != DefaultLocale {
		chain = append(chain, tag)
		i := strings.LastIndexByte(tag, '-')
		if i < 0 {
			break
		}
		tag = tag[:i]
	}
	return append(chain, DefaultLocale)
}
