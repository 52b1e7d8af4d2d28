package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders"
)

// Sender delivers messages over one channel through one provider account. Implementations
// live in senders/<provider>; errors should be *senders.Error so that dispatch knows whether
// a retry makes sense (an unclassified error counts as ambiguous).
type Sender interface {
	// Send hands m to the provider. It must honour ctx's deadline and pass m.DeliveryID to
	// the provider as an idempotency key wherever the provider takes one.
	Send(ctx context.Context, m *senders.Message) (senders.Result, error)
	// Provider names the provider account, e.g. "sms:twilio". Rate limits are kept per
	// provider account.
	Provider() string
}

// Template is a template row as the renderer needs it.
type Template struct {
	Name string
	// Content is the template's content jsonb; nil when the template row is missing.
	Content json.RawMessage
}

// Renderer turns a template and a payload into a channel's content. A render error ends the
// delivery FAILED: a retry would render the same way.
type Renderer interface {
	Render(ctx context.Context, t Template, locale string, ch herald.Channel, payload json.RawMessage) (senders.Content, error)
}

// RendererFunc adapts a function to Renderer, e.g. a template package's Render:
//
//	dispatch.RendererFunc(func(_ context.Context, t dispatch.Template, locale string, ch herald.Channel,
//		payload json.RawMessage) (senders.Content, error) {
//		return templates.Render(t.Content, locale, ch, payload)
//	})
type RendererFunc func(ctx context.Context, t Template, locale string, ch herald.Channel, payload json.RawMessage) (senders.Content, error)

// Render implements Renderer.
func (f RendererFunc) Render(ctx context.Context, t Template, locale string, ch herald.Channel, payload json.RawMessage) (senders.Content, error) {
	return f(ctx, t, locale, ch, payload)
}

// DefaultRenderer is a minimal renderer that keeps herald usable before a real template
// engine is plugged in. It reads content[channel][locale] (falling back to
// content[channel]["default"], then to content[channel] itself) as an object with the fields
// title, body, subject, text and html, and replaces {{key}} with the payload's top-level
// value of that key. Webhook deliveries carry the payload itself as their JSON body. Without
// template content, the body and text are the template name.
type DefaultRenderer struct{}

type channelContent struct {
	Title   string `json:"title"`
	Body    string `json:"body"`
	Subject string `json:"subject"`
	Text    string `json:"text"`
	HTML    string `json:"html"`
}

// Render implements Renderer.
func (DefaultRenderer) Render(_ context.Context, t Template, locale string, ch herald.Channel, payload json.RawMessage) (senders.Content, error) {
	vars := map[string]any{}
	if len(payload) > 0 {
		if err := json.Unmarshal(payload, &vars); err != nil {
			return senders.Content{}, fmt.Errorf("render %s: payload is not a JSON object: %w", t.Name, err)
		}
	}
	cc, err := pickContent(t, locale, ch)
	if err != nil {
		return senders.Content{}, err
	}
	if cc == (channelContent{}) {
		cc = channelContent{Title: t.Name, Body: t.Name, Subject: t.Name, Text: t.Name}
	}
	fill := func(s string) string { return substitute(s, vars) }
	c := senders.Content{
		Title: fill(cc.Title), Body: fill(cc.Body),
		Subject: fill(cc.Subject), Text: fill(cc.Text), HTML: fill(cc.HTML),
	}
	if ch == herald.ChannelWebhook {
		c.JSON = payload
		if len(c.JSON) == 0 {
			c.JSON = json.RawMessage("{}")
		}
	}
	return c, nil
}

func pickContent(t Template, locale string, ch herald.Channel) (channelContent, error) {
	var cc channelContent
	if len(t.Content) == 0 {
		return cc, nil
	}
	var byChannel map[string]json.RawMessage
	if err := json.Unmarshal(t.Content, &byChannel); err != nil {
		return cc, fmt.Errorf("render %s: template content is not an object: %w", t.Name, err)
	}
	raw, ok := byChannel[string(ch)]
	if !ok {
		raw, ok = byChannel[strings.ToLower(string(ch))]
	}
	if !ok {
		return cc, nil
	}
	var byLocale map[string]json.RawMessage
	if json.Unmarshal(raw, &byLocale) == nil {
		for _, key := range []string{locale, "default"} {
			if v, ok := byLocale[key]; ok && key != "" {
				if err := json.Unmarshal(v, &cc); err == nil {
					return cc, nil
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &cc); err != nil {
		return cc, fmt.Errorf("render %s: content for %s: %w", t.Name, ch, err)
	}
	return cc, nil
}

func substitute(s string, vars map[string]any) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	for k, v := range vars {
		var text string
		switch v := v.(type) {
		case string:
			text = v
		default:
			b, _ := json.Marshal(v)
			text = string(b)
		}
		s = strings.ReplaceAll(s, "{{"+k+"}}", text)
	}
	return s
}
