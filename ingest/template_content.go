package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/senders/templates"
)

// Template content is checked twice with the senders' engine (senders/templates): its shape
// and syntax when it is stored (PUT, 400 invalid_template), and its limits (PUT, 422
// template_not_allowed: nothing that could run unbounded is stored), and whether it renders with a
// notification's payload when a notification is accepted (POST, 422 template_render_failed),
// so that a missing variable is refused at ingest instead of failing the delivery at send
// time. Content that is the empty object is not checked: dispatch renders it with its
// built-in fallback (the template name as the text, the payload as the webhook body).

// emptyContent reports whether template content is absent, null or the empty object.
func emptyContent(c []byte) bool {
	s := bytes.TrimSpace(c)
	return len(s) == 0 || string(s) == "null" || string(s) == "{}"
}

// checkTemplateContent validates non-empty content against the template's channels: every
// channel with content must be listed in channels (content for an unlisted channel could
// never be sent and is most likely a mistake), and every listed channel but WEBHOOK must have
// content (a WEBHOOK delivery without it is sent as the sender's envelope).
func checkTemplateContent(content []byte, channels []herald.Channel) error {
	if emptyContent(content) {
		return nil
	}
	has, err := templates.Channels(content)
	switch {
	case errors.Is(err, templates.ErrNotAllowed):
		return templateNotAllowed(strings.TrimPrefix(err.Error(), templates.ErrNotAllowed.Error()+": "))
	case err != nil:
		return invalidTemplate(strings.TrimPrefix(err.Error(), templates.ErrInvalid.Error()+": "))
	}
	for _, c := range has {
		if !slices.Contains(channels, c) {
			return invalidTemplate(fmt.Sprintf("%s: content for a channel that channels does not list", c))
		}
	}
	for _, c := range channels {
		if c != herald.ChannelWebhook && !slices.Contains(has, c) {
			return invalidTemplate(fmt.Sprintf("%s: listed in channels but has no content (%s.%s is required)", c, c, templates.DefaultLocale))
		}
	}
	return nil
}

// invalidTemplate is the 400 answer to template content the engine refuses; msg is the
// validator's message, naming the offending field ("EMAIL.ja.html: ...").
func invalidTemplate(msg string) *apiError {
	return &apiError{
		status: http.StatusBadRequest, code: codeInvalidTemplate, title: "Invalid template",
		detail: msg, fields: []fieldError{{Field: "content", Message: msg}},
	}
}

// templateNotAllowed is the 422 answer to content that parses but could run unbounded or
// exceeds a limit (docs/senders.md "Template limits"); msg names the field and the reason.
func templateNotAllowed(msg string) *apiError {
	return &apiError{
		status: http.StatusUnprocessableEntity, code: codeTemplateNotAllowed, title: "Template not allowed",
		detail: msg, fields: []fieldError{{Field: "content", Message: msg}},
	}
}

// checkRender renders non-empty template content once for every channel that gets a delivery,
// in locale, with payload (as normalizeObject decoded it), and returns a 422
// template_render_failed when one fails. The rendered content is discarded: dispatch renders
// again at send time with the then current locale. Compiled templates are cached by the
// engine, so this costs one execution per channel. It runs before the notification is
// written, outside any transaction, and every render is bounded by the engine's output and
// step budget.
func checkRender(content []byte, locale string, deliver []herald.Channel, payload map[string]any) error {
	if emptyContent(content) {
		return nil
	}
	for _, c := range deliver {
		_, err := templates.RenderDecoded(content, locale, c, payload)
		switch {
		case err == nil:
		case c == herald.ChannelWebhook && errors.Is(err, templates.ErrNoContent):
			// Sent as the webhook sender's envelope.
		case errors.Is(err, templates.ErrRender):
			return renderFailed("payload", strings.TrimPrefix(err.Error(), templates.ErrRender.Error()+": "))
		default:
			// Content stored before it was validated on PUT: invalid, or without this channel.
			return renderFailed("template", err.Error())
		}
	}
	return nil
}

// renderFailed is the 422 answer to a notification its template cannot be rendered for.
func renderFailed(field, msg string) *apiError {
	return &apiError{
		status: http.StatusUnprocessableEntity, code: codeTemplateRenderFailed, title: "Template render failed",
		detail: "the template cannot be rendered with this notification", fields: []fieldError{{Field: field, Message: msg}},
	}
}
