package templates

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	ttemplate "text/template"
	"text/template/parse"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// bomb is the template of the security review: accepted before the limits, it never returned.
const bomb = `{{range 9000000000000000000}}{{printf "%0900000d" 0}}{{end}}`

func sms(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"SMS": map[string]any{"default": map[string]string{"text": text}}})
	return b
}

func TestValidateRefusesUnboundedTemplates(t *testing.T) {
	for name, text := range map[string]string{
		"the bomb":                     bomb,
		"range over a number":          `{{range 10}}x{{end}}`,
		"range over len":               `{{range len .items}}x{{end}}`,
		"range over a pipeline":        `{{range (index .a 0)}}x{{end}}`,
		"range over an index":          `{{range $i, $e := .a}}{{range $i}}x{{end}}{{end}}`,
		"range over a number variable": `{{$n := 1000}}{{range $n}}x{{end}}`,
		"variable rebound":             `{{$n := .a}}{{range .b}}{{range $n}}{{end}}{{$n = len .b}}{{end}}`,
		"if declares a number":         `{{if $n := 1000}}{{range $n}}x{{end}}{{end}}`,
		"with declares a number":       `{{with $n := 1000}}{{range $n}}x{{end}}{{end}}`,
		"range over with dot":          `{{with 1000}}{{range .}}x{{end}}{{end}}`,
		"json.Number method":           `{{range .n.Int64}}x{{end}}`,
		"printf width":                 `{{printf "%0900000d" 0}}`,
		"printf star width":            `{{printf "%*d" 100000000 0}}`,
		"printf arg index":             `{{printf "%[1]*d" 100000000 0}}`,
		"printf precision":             `{{printf "%.65f" .x}}`,
		"printf truncates":             `{{printf "%.1s" .x}}`,
		"printf format not literal":    `{{printf .f 1}}`,
		"print in a condition":         `{{if print $}}x{{end}}`,
		"print into len":               `{{print $ | len}}`,
		"print in a variable":          `{{$x := print $}}`,
		"html as an argument":          `{{eq (html .x) "y"}}`,
		"call":                         `{{call .f}}`,
		"define":                       `{{define "x"}}y{{end}}{{template "x"}}`,
		"block":                        `{{block "x" .}}y{{end}}`,
		"template":                     `{{template "x"}}`,
		"too deep":                     strings.Repeat(`{{if .a}}`, MaxNesting+1) + strings.Repeat(`{{end}}`, MaxNesting+1),
		"too many operands":            `{{and` + strings.Repeat(` .a`, MaxPipelineNodes) + `}}`,
	} {
		err := Validate(sms(text))
		require.ErrorIs(t, err, ErrNotAllowed, name)
		require.Contains(t, err.Error(), "SMS.default.text", name)
	}
	require.ErrorIs(t, Validate(sms(strings.Repeat("x", MaxContentBytes))), ErrNotAllowed, "too large")
}

func TestValidateAllowsEverydayTemplates(t *testing.T) {
	for _, text := range []string{
		`Hello {{.user.name}}, your code is {{.code}}`,
		`{{if .vip}}Dear VIP{{else if .new}}Welcome{{else}}Hi{{end}} {{with .order}}#{{.id}}{{end}}`,
		`{{range .items}}- {{.name}} × {{.qty}}{{range .options}} +{{.}}{{end}}{{end}}`,
		`{{range $i, $e := .items}}{{$i}}: {{$e.name}}{{end}}`,
		`{{$items := .items}}{{range $items}}{{.}}{{end}}{{range $.items}}{{.}}{{end}}`,
		`{{with .order}}{{range .lines}}{{.sku}}{{end}}{{end}}`,
		`{{printf "%.2f" .amount}} {{printf "%-10s|%5d" .name .n}} {{.name | printf "%q" | html}}`,
		`{{if and (eq .status "shipped") (gt (len .items) 0)}}{{index .items 0}}{{end}}`,
		`{{range .items}}{{if eq .id "x"}}{{break}}{{end}}{{.id}}{{end}}`,
		`{{/* a comment */}}{{.code}}`,
	} {
		require.NoError(t, Validate(sms(text)), text)
	}
}

func TestRenderStopsAtTheOutputLimit(t *testing.T) {
	content := sms(`{{range .a}}{{$}}{{end}}`)
	require.NoError(t, Validate(content))
	payload := `{"a":[` + strings.Repeat(`1,`, 999) + `1],"pad":"` + strings.Repeat("x", 10_000) + `"}`
	_, err := Render(content, "", herald.ChannelSMS, json.RawMessage(payload))
	require.ErrorIs(t, err, ErrRender)
	require.ErrorIs(t, err, errOutputLimit)

	// The budget is per channel: every part of an e-mail counts.
	half := strings.Repeat("x", MaxOutputBytes/2)
	email, _ := json.Marshal(map[string]any{"EMAIL": map[string]any{"default": map[string]string{
		"subject": "s", "text": "{{.h}}", "html": "{{.h}}"}}})
	_, err = Render(email, "", herald.ChannelEmail, json.RawMessage(`{"h":"`+half+`"}`))
	require.ErrorIs(t, err, errOutputLimit)
}

func TestRenderStopsAtTheStepLimit(t *testing.T) {
	// Nested ranges that print nothing: 300 × 300 iterations, no output at all.
	content := sms(`{{range .a}}{{range $.a}}{{if .}}{{end}}{{end}}{{end}}`)
	require.NoError(t, Validate(content))
	payload := `{"a":[` + strings.Repeat(`1,`, 299) + `1]}`
	_, err := Render(content, "", herald.ChannelSMS, json.RawMessage(payload))
	require.ErrorIs(t, err, errStepLimit)
}

// TestMeterBoundsEvenUncheckedTemplates runs the bomb without the whitelist, metered only:
// the step budget alone stops it, well within a second.
func TestMeterBoundsEvenUncheckedTemplates(t *testing.T) {
	for _, text := range []string{
		`{{range 9000000000000000000}}{{end}}`,
		`{{range 9000000000000000000}}{{$x := 1}}{{end}}`,
		`{{range 9000000000000000000}}{{if false}}{{end}}{{end}}`,
	} {
		trees, err := parse.Parse("t", text, "", "", builtins)
		require.NoError(t, err)
		meter(trees["t"])
		tmpl, err := ttemplate.New("t").AddParseTree("t", trees["t"])
		require.NoError(t, err)
		start := time.Now()
		err = tmpl.Execute(&writer{b: newBudget()}, nil)
		require.ErrorIs(t, err, errStepLimit, text)
		require.Less(t, time.Since(start), time.Second, text)
	}
}

func TestCheckFormat(t *testing.T) {
	for _, f := range []string{"%d", "%5d", "%-64s", "%.2f", "%08.3e", "%%", "100%", "%v %q %x", "%+d"} {
		require.NoError(t, checkFormat(f), f)
	}
	for _, f := range []string{"%65d", "%0900000d", "%.65f", "%*d", "%.*f", "%[2]d", "%.3s", "%99999999999999999999d"} {
		require.Error(t, checkFormat(f), f)
	}
}

// BenchmarkRenderCrafted measures renders crafted to cost the most within the limits: every
// step compares two 7,000-byte strings 20 times, or sorts a 300-key map, until the step
// budget stops them. Run: go test -run '^$' -bench BenchmarkRenderCrafted ./senders/templates/
func BenchmarkRenderCrafted(b *testing.B) {
	s := strings.Repeat("x", 7000)
	keys := map[string]int{}
	for i := range 300 {
		keys[fmt.Sprintf("key%03d", i)] = i
	}
	payload, err := json.Marshal(map[string]any{"a": make([]int, 200), "s": s, "t": s[:6999] + "y", "m": keys})
	require.NoError(b, err)
	for name, text := range map[string]string{
		"compare": `{{range .a}}{{range $.a}}{{if eq $.s` + strings.Repeat(" $.t", 20) + `}}{{end}}{{end}}{{end}}`,
		"map":     `{{range .a}}{{range $.m}}{{end}}{{end}}`,
		"print":   `{{range .a}}{{$}}{{end}}`,
	} {
		content := sms(text)
		require.NoError(b, Validate(content))
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_, err := Render(content, "", herald.ChannelSMS, payload)
				require.ErrorIs(b, err, ErrRender)
			}
		})
	}
}
