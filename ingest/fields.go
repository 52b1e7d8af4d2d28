package ingest

import (
	"fmt"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/language"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/schedule"
)

// Limits and formats of the API's fields (documented in docs/api.md).
const (
	maxIdempotencyKey = 100
	maxNameLen        = 100 // template names
	maxEmailLen       = 254
	maxURLLen         = 2048
	maxPushTokenLen   = 4096
	maxPushTokens     = 20
	maxOptOuts        = 100
	maxUserTags       = 64
)

var (
	e164Re     = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)
	nameRe     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)
	categoryRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	clockRe    = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)
)

// fieldErrors collects validation failures in input order.
type fieldErrors []fieldError

func (fe *fieldErrors) add(field, format string, args ...any) {
	*fe = append(*fe, fieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (fe fieldErrors) err() error {
	if len(fe) == 0 {
		return nil
	}
	return invalid(fe...)
}

// validIdempotencyKey: 1–100 printable ASCII characters.
func validIdempotencyKey(k string) bool {
	if len(k) == 0 || len(k) > maxIdempotencyKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

func checkTemplateName(fe *fieldErrors, field, name string) {
	if !nameRe.MatchString(name) {
		fe.add(field, "must be 1-%d characters of letters, digits, '_', '.', '-', starting with a letter or digit", maxNameLen)
	}
}

func checkCategory(fe *fieldErrors, field, c string) {
	if !categoryRe.MatchString(c) {
		fe.add(field, "must be 1-64 characters of lower-case letters, digits, '_', '.', '-', starting with a letter or digit")
	}
}

// parseChannels parses a non-empty set of channels and returns it in canonical order
// (herald.Channels). A repeated channel is an error: the field is a set.
func parseChannels(fe *fieldErrors, field string, raw []string, present bool) []herald.Channel {
	if !present || len(raw) == 0 {
		fe.add(field, "must be a non-empty array of PUSH, EMAIL, SMS, WEBHOOK")
		return nil
	}
	seen := make(map[herald.Channel]bool, len(raw))
	for i, s := range raw {
		c, err := herald.ParseChannel(s)
		if err != nil {
			fe.add(fmt.Sprintf("%s[%d]", field, i), "must be one of PUSH, EMAIL, SMS, WEBHOOK")
			continue
		}
		if seen[c] {
			fe.add(fmt.Sprintf("%s[%d]", field, i), "repeats %s", c)
			continue
		}
		seen[c] = true
	}
	out := make([]herald.Channel, 0, len(seen))
	for _, c := range herald.Channels {
		if seen[c] {
			out = append(out, c)
		}
	}
	return out
}

func checkEmail(fe *fieldErrors, field, s string) {
	if len(s) > maxEmailLen || strings.ContainsAny(s, "\x00\r\n") {
		fe.add(field, "must be an e-mail address of at most %d characters", maxEmailLen)
		return
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || a.Name != "" {
		fe.add(field, "must be a bare e-mail address (local@domain)")
	}
}

func checkPhone(fe *fieldErrors, field, s string) {
	if !e164Re.MatchString(s) {
		fe.add(field, "must be an E.164 phone number (+ and 2-15 digits)")
	}
}

func checkWebhookURL(fe *fieldErrors, field, s string) {
	if len(s) > maxURLLen || !utf8.ValidString(s) || strings.ContainsAny(s, "\x00 \t\r\n") {
		fe.add(field, "must be an absolute http(s) URL of at most %d characters", maxURLLen)
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		fe.add(field, "must be an absolute http(s) URL without credentials")
	}
}

// checkLocale accepts a well-formed BCP 47 tag and returns its canonical form.
func checkLocale(fe *fieldErrors, field, s string) string {
	if len(s) > 35 {
		fe.add(field, "must be a BCP 47 language tag")
		return s
	}
	tag, err := language.Parse(s)
	if err != nil {
		fe.add(field, "must be a BCP 47 language tag")
		return s
	}
	return tag.String()
}

// checkTimeZone accepts an IANA time zone name ("Europe/Berlin", "UTC").
func checkTimeZone(fe *fieldErrors, field, s string) {
	// LoadLocation also accepts "" and "Local", which name no zone, and file paths.
	if s == "" || s == "Local" || strings.ContainsAny(s, "\x00\\") || strings.HasPrefix(s, "/") || strings.Contains(s, "..") {
		fe.add(field, "must be an IANA time zone name")
		return
	}
	if _, err := schedule.Location(s); err != nil {
		fe.add(field, "must be an IANA time zone name")
	}
}

// pushTokenJSON is a registered device, as the API reads and writes it.
type pushTokenJSON struct {
	Token    string `json:"token"`
	Platform string `json:"platform"`
}

func checkPushTokens(fe *fieldErrors, field string, tokens []pushTokenJSON) {
	if len(tokens) > maxPushTokens {
		fe.add(field, "must hold at most %d tokens", maxPushTokens)
		return
	}
	seen := make(map[string]bool, len(tokens))
	for i, t := range tokens {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !printableASCII(t.Token, maxPushTokenLen) {
			fe.add(f+".token", "must be 1-%d printable ASCII characters", maxPushTokenLen)
		} else if seen[t.Token] {
			fe.add(f+".token", "repeats an earlier token")
		}
		seen[t.Token] = true
		if t.Platform != "FCM" && t.Platform != "APNS" {
			fe.add(f+".platform", "must be FCM or APNS")
		}
	}
}

func printableASCII(s string, maxLen int) bool {
	if len(s) == 0 || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// clock is a wall-clock time of day in minutes since midnight.
type clock int

func parseClock(fe *fieldErrors, field, s string) clock {
	if !clockRe.MatchString(s) {
		fe.add(field, "must be a 24-hour time HH:MM")
		return 0
	}
	return clock((int(s[0]-'0')*10+int(s[1]-'0'))*60 + int(s[3]-'0')*10 + int(s[4]-'0'))
}

func (c clock) String() string { return fmt.Sprintf("%02d:%02d", int(c)/60, int(c)%60) }

// channelStrings returns the channel names.
func channelStrings(cs []herald.Channel) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

func containsChannel(cs []string, c herald.Channel) bool { return slices.Contains(cs, string(c)) }
