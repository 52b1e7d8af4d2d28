package console

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/timeline"
)

var pageNames = []string{"login", "messages", "notification", "trace", "lag", "error", "redrive", "redrive_one"}

var funcs = template.FuncMap{
	"stamp": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") },
	"gap":   timeline.Gap,
	"took":  func(a timeline.Attempt) string { return timeline.Gap(a.Finished.Sub(a.Started)) },
	"dash": func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	},
}

// parsePages parses each page with the shared layout.
func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("parse console page %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// page is what every page's layout reads; Data is the page's own.
type page struct {
	Title    string
	LoggedIn bool
	Nav      string
	Data     any
}

// render writes page name with status. The page is rendered into a buffer first, so that a
// template error becomes a 500 rather than half a page.
func (c *Console) render(w http.ResponseWriter, status int, name string, p page) {
	var buf bytes.Buffer
	if err := c.pages[name].Execute(&buf, p); err != nil {
		c.log.Error("render console page", zap.String("page", name), zap.Error(err))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// fail shows an error page: status and a message meant for the operator (never an internal
// error's text, which is logged).
func (c *Console) fail(w http.ResponseWriter, status int, msg string, err error) {
	if err != nil {
		c.log.Error("console request failed", zap.Int("status", status), zap.Error(err))
	}
	c.render(w, status, "error", page{Title: http.StatusText(status), LoggedIn: status != http.StatusUnauthorized, Data: msg})
}
