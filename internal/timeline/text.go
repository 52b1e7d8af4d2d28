package timeline

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes tl for a person: the notification, its trace (and the trace's page in
// Jaeger when jaegerURL is set), then per delivery its steps with the gap from the step
// before, and its attempt log. Times are UTC with milliseconds; gaps are rounded to 0.1 ms.
// It shows ids, statuses and provider codes only: never a recipient or a payload.
func WriteText(w io.Writer, tl *Timeline, jaegerURL string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("notification\t%s\n", tl.NotificationID)
	p("client\t%s\n", tl.ClientID)
	p("user\t%d\n", tl.UserID)
	p("template\t%s (%s)\n", tl.Template, tl.Category)
	p("priority\t%s\n", tl.Priority)
	p("accepted\t%s\n", stamp(tl.AcceptedAt))
	p("trace\t%s\n", or(tl.TraceID, "none"))
	if u := JaegerURL(jaegerURL, tl.TraceID); u != "" {
		p("jaeger\t%s\n", u)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(tl.Deliveries) == 0 {
		_, err := fmt.Fprintln(w, "\nno deliveries (every channel suppressed)")
		return err
	}
	for _, d := range tl.Deliveries {
		p("\ndelivery %s  %s  %s  attempts %d", d.ID, d.Channel, d.Status, d.Attempts)
		if d.Provider != "" {
			p("  provider %s", d.Provider)
		}
		if d.ProviderMessageID != "" {
			p("  message %s", d.ProviderMessageID)
		}
		if d.NextAttemptAt != nil {
			p("  due %s", stamp(*d.NextAttemptAt))
		}
		if d.RedriveID != "" {
			p("  re-driven by %s", d.RedriveID)
		}
		p("\n  AT\tGAP\tSTATUS\tNOTE\n")
		for _, s := range d.Steps {
			p("  %s\t+%s\t%s\t%s\n", stamp(s.At), Gap(s.Since), s.Status, s.Note)
		}
		if len(d.AttemptLog) > 0 {
			p("\n  ATTEMPT\tSTARTED\tTOOK\tOUTCOME\tCLASS\tPROVIDER\tCODE\tNEXT ATTEMPT\n")
			for _, a := range d.AttemptLog {
				next := "-"
				if a.NextAttemptAt != nil {
					next = stamp(*a.NextAttemptAt)
				}
				p("  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%s", a.Attempt, stamp(a.Started), Gap(a.Finished.Sub(a.Started)),
					a.Outcome, or(a.ErrorClass, "-"), or(a.Provider, "-"), or(a.ProviderCode, "-"), next)
				if a.RedriveID != "" {
					p("\tre-drive %s", a.RedriveID)
				}
				p("\n")
			}
		}
		if len(d.Receipts) > 0 {
			p("\n  RECEIPT\tPROVIDER\tSTATUS\tCODE\tRECEIVED\tAPPLIED\n")
			for _, r := range d.Receipts {
				p("  %s\t%s\t%s\t%s\t%s\t%t\n", stamp(r.At), r.Provider, r.Status, or(r.Code, "-"), stamp(r.ReceivedAt), r.Applied)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// Gap formats a duration between two steps: "0s", "1.2ms", "3.5s", "2m3s".
func Gap(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func or(s, dflt string) string {
	if strings.TrimSpace(s) == "" {
		return dflt
	}
	return s
}
