package console

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/heraldhq/herald/internal/timeline"
)

// traceIDPattern is a W3C trace id: 32 lowercase hex digits.
var traceIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// shownTags are the span tags the trace view shows, in this order: ids, counts, codes and
// names that herald's spans and its HTTP clients set. Every other tag stays hidden: a tag
// value (an error text, a URL, an attribute some library added) may hold personal data.
var shownTags = []string{
	"herald.notification_id", "herald.delivery_id", "herald.commit_lsn", "herald.attempt",
	"herald.channel", "herald.priority", "herald.provider", "herald.deliveries",
	"herald.rate_limit.allowed", "herald.rate_limit.wait_ms", "herald.lease.held",
	"messaging.destination.name", "http.request.method", "http.response.status_code",
	"http.status_code", "smtp.reply_code", "otel.status_code", "error",
}

// maxIndent is the deepest indentation the page draws (CSS classes d0…d10); deeper spans
// show their depth in the row's data-depth.
const maxIndent = 10

// spanRow is one span of the trace view, in tree order.
type spanRow struct {
	ID, Name, Service string
	Depth, Indent     int
	Offset, Duration  string // ms from the trace's first start, and the span's own
	Tags              []tagRow
	Error             bool
}

type tagRow struct{ Key, Value string }

type traceData struct {
	ID        string
	Spans     []spanRow
	Services  []string
	Total     string // ms from the first start to the last end
	JaegerURL string
}

// trace shows trace {traceID} as Jaeger's query API returns it: the spans as a tree in start
// order, with their service, timing and the tags of shownTags.
func (c *Console) trace(w http.ResponseWriter, r *http.Request) {
	id := strings.ToLower(r.PathValue("traceID"))
	if !traceIDPattern.MatchString(id) {
		c.fail(w, http.StatusBadRequest, "a trace id is 32 hexadecimal digits", nil)
		return
	}
	if c.cfg.JaegerURL == "" {
		c.fail(w, http.StatusServiceUnavailable, "Jaeger is not configured: start herald serve with --jaeger-url (HERALD_JAEGER_URL) to see traces here", nil)
		return
	}
	tr, err := fetchTrace(r.Context(), c.jaeger, c.cfg.JaegerURL, id)
	if errors.Is(err, errTraceNotFound) {
		c.fail(w, http.StatusNotFound, "Jaeger holds no trace with this id: spans reach it a few seconds after the work, and a Jaeger that keeps traces in memory forgets them when it restarts", nil)
		return
	}
	if err != nil {
		c.fail(w, http.StatusBadGateway, fmt.Sprintf("Jaeger did not answer with the trace within %v", jaegerTimeout), fmt.Errorf("trace %s: %w", id, err))
		return
	}
	d := buildTrace(tr)
	d.ID, d.JaegerURL = id, timeline.JaegerURL(c.cfg.JaegerURL, id)
	c.render(w, http.StatusOK, "trace", page{Title: "Trace " + id, LoggedIn: true, Nav: "messages", Data: d})
}

// node is a span while the tree is built.
type node struct {
	row      spanRow
	start    int64
	parent   string
	children []*node
}

// buildTrace orders the spans of tr as a tree: a span under its CHILD_OF parent (else its
// FOLLOWS_FROM one), a span whose parent is not in the trace at the top; siblings by start.
func buildTrace(tr *jaegerTrace) traceData {
	var (
		d        traceData
		nodes    = map[string]*node{}
		order    []*node
		services = map[string]bool{}
		first    int64
		last     int64
	)
	for _, data := range tr.Data {
		for _, s := range data.Spans {
			if _, dup := nodes[s.SpanID]; dup {
				continue
			}
			n := &node{start: s.StartTime, parent: parentOf(s.References)}
			n.row = spanRow{ID: s.SpanID, Name: s.OperationName, Service: data.Processes[s.ProcessID].ServiceName,
				Duration: millis(s.Duration)}
			for _, key := range shownTags {
				for _, tg := range s.Tags {
					if tg.Key == key {
						v := fmt.Sprint(tg.Value)
						n.row.Tags = append(n.row.Tags, tagRow{Key: key, Value: v})
						n.row.Error = n.row.Error || (key == "error" && v == "true") || (key == "otel.status_code" && v == "ERROR")
					}
				}
			}
			if n.row.Service != "" {
				services[n.row.Service] = true
			}
			if len(order) == 0 || s.StartTime < first {
				first = s.StartTime
			}
			last = max(last, s.StartTime+s.Duration)
			nodes[s.SpanID] = n
			order = append(order, n)
		}
	}
	var roots []*node
	for _, n := range order {
		if p := nodes[n.parent]; p != nil && p != n {
			p.children = append(p.children, n)
		} else {
			roots = append(roots, n)
		}
	}
	seen := map[*node]bool{}
	var walk func(ns []*node, depth int)
	walk = func(ns []*node, depth int) {
		slices.SortStableFunc(ns, func(a, b *node) int { return cmp.Compare(a.start, b.start) })
		for _, n := range ns {
			if seen[n] {
				continue
			}
			seen[n] = true
			n.row.Depth, n.row.Indent, n.row.Offset = depth, min(depth, maxIndent), millis(n.start-first)
			d.Spans = append(d.Spans, n.row)
			walk(n.children, depth+1)
		}
	}
	walk(roots, 0)
	// Spans in a parent cycle (no root above them) still show, at the top.
	for _, n := range order {
		if !seen[n] {
			walk([]*node{n}, 0)
		}
	}
	for s := range services {
		d.Services = append(d.Services, s)
	}
	slices.Sort(d.Services)
	d.Total = millis(last - first)
	return d
}

// parentOf is the span a span's references name as its parent: CHILD_OF, else FOLLOWS_FROM.
func parentOf(refs []jaegerRef) string {
	var follows string
	for _, r := range refs {
		switch r.RefType {
		case "CHILD_OF":
			return r.SpanID
		case "FOLLOWS_FROM":
			follows = cmp.Or(follows, r.SpanID)
		}
	}
	return follows
}

// millis formats µs as milliseconds with three decimals.
func millis(us int64) string {
	return fmt.Sprintf("%.3f", float64(us)/1000)
}
