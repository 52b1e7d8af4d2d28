// Package console is herald's operator console: server-rendered pages under /console that
// show the message log, one notification's timeline (the view of herald trace), its trace as
// Jaeger's query API returns it, and live lane, relay and provider figures. It reads, from
// the database, Kafka's group offsets and Jaeger; the one thing it writes is an operator's
// re-drive (redrive.go), through internal/redrive as the API does.
//
// An operator logs in with an API key that holds the operator scope; the console keeps a
// signed, HttpOnly, SameSite=Strict session cookie that names the key's client and expires
// after Config.SessionTTL, and checks on every request that the client still holds the scope.
// Pages show ids, statuses, codes and counts only: never a phone number, an e-mail address,
// a push token, a payload or an error text.
package console

import (
	"cmp"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"time"

	"github.com/gorilla/securecookie"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
)

//go:embed templates/*.html templates/console.css
var files embed.FS

// Config configures the console. Zero fields take the defaults noted.
type Config struct {
	// JaegerURL is the base URL of Jaeger's UI and query API (one address in Jaeger's
	// all-in-one); when set, a timeline links its trace in the console's trace view, which
	// reads <JaegerURL>/api/traces/<trace id>, and in the Jaeger UI (<JaegerURL>/trace/<trace
	// id>). Default: no trace view and no link.
	JaegerURL string
	// SessionTTL is how long a login lasts. Default 30 minutes.
	SessionTTL time.Duration
	// SessionKey signs the session cookie (HMAC-SHA256), at least 32 bytes. Default: 32
	// random bytes drawn at New, so sessions end when the process restarts and are valid
	// only on the process that issued them.
	SessionKey []byte
	// Slot is the relay's replication slot, whose lag the lag page shows. Default
	// "herald_relay".
	Slot string
	// Lanes are the dispatch lanes' topics and consumer groups. Default: herald's default
	// names for every priority.
	Lanes map[herald.Priority]Lane
	// RateLimits are the providers' limits in calls per second, keyed by provider (as
	// dispatch's RateLimits). A provider without an entry shows no limit.
	RateLimits map[string]int
	// PageSize is how many rows a page of the message log holds. Default 50.
	PageSize int
	// RedriveMax is the most deliveries one re-drive may match, as ingest's. Default
	// 1,000,000 (internal/redrive's DefaultMax).
	RedriveMax int
}

// Lane names one dispatch lane's topic and consumer group.
type Lane struct {
	Topic, Group string
}

// DefaultSessionTTL is the default Config.SessionTTL.
const DefaultSessionTTL = 30 * time.Minute

func (c Config) withDefaults() (Config, error) {
	c.SessionTTL = cmp.Or(c.SessionTTL, DefaultSessionTTL)
	c.Slot = cmp.Or(c.Slot, herald.DefaultSlot)
	c.PageSize = cmp.Or(c.PageSize, 50)
	lanes := map[herald.Priority]Lane{}
	for _, p := range herald.Priorities {
		l := c.Lanes[p]
		l.Topic = cmp.Or(l.Topic, herald.DefaultTopic(p))
		l.Group = cmp.Or(l.Group, herald.DefaultConsumerGroup(p))
		lanes[p] = l
	}
	c.Lanes = lanes
	if c.SessionKey == nil {
		c.SessionKey = make([]byte, 32)
		if _, err := rand.Read(c.SessionKey); err != nil {
			return c, fmt.Errorf("console session key: %w", err)
		}
	}
	return c, nil
}

func (c Config) validate() error {
	var errs []error
	if len(c.SessionKey) < 32 {
		errs = append(errs, errors.New("console session key: at least 32 bytes"))
	}
	if c.SessionTTL < time.Minute || c.SessionTTL > 24*time.Hour {
		errs = append(errs, fmt.Errorf("console session TTL %v: between 1m and 24h", c.SessionTTL))
	}
	if c.PageSize < 1 || c.PageSize > 500 {
		errs = append(errs, fmt.Errorf("console page size %d: between 1 and 500", c.PageSize))
	}
	return errors.Join(errs...)
}

// Console serves the operator console. Create it with New and mount Handler under /console/.
type Console struct {
	cfg    Config
	pool   *pgxpool.Pool
	adm    *kadm.Client // nil: lane lag not shown
	log    *zap.Logger
	cookie *securecookie.SecureCookie
	pages  map[string]*template.Template
	jaeger *http.Client // Jaeger's query API, for the trace view
}

// New returns a console reading from pool and, for the lanes' consumer lag, from adm (nil:
// the lag page shows no lane lag).
func New(cfg Config, pool *pgxpool.Pool, adm *kadm.Client, log *zap.Logger) (*Console, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	sc := securecookie.New(cfg.SessionKey, nil).MaxAge(int(cfg.SessionTTL.Seconds()))
	sc.SetSerializer(securecookie.JSONEncoder{})
	return &Console{cfg: cfg, pool: pool, adm: adm, log: log.With(zap.String("component", "console")),
		cookie: sc, pages: pages, jaeger: newJaegerClient()}, nil
}

// Handler serves every console page under /console/.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console/login", c.loginForm)
	mux.HandleFunc("POST /console/login", c.login)
	mux.HandleFunc("POST /console/logout", c.logout)
	mux.HandleFunc("GET /console/console.css", serveCSS)
	mux.Handle("GET /console/{$}", c.operator(c.messages))
	mux.Handle("GET /console/notifications/{id}", c.operator(c.notification))
	mux.Handle("GET /console/traces/{traceID}", c.operator(c.trace))
	mux.Handle("GET /console/lag", c.operator(c.lag))
	mux.Handle("GET /console/redrives", c.operator(c.redrives))
	// The one page that writes: besides the SameSite=Strict session cookie, a cross-origin
	// POST (by Sec-Fetch-Site or Origin) is refused before the session is even read.
	mux.Handle("POST /console/redrives", http.NewCrossOriginProtection().Handler(c.operator(c.postRedrive)))
	mux.Handle("GET /console/redrives/{id}", c.operator(c.redriveOne))
	mux.HandleFunc("/console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
	})
	return secureHeaders(mux)
}

// secureHeaders keeps the console's pages out of frames and caches, and lets them load
// nothing but their own stylesheet.
func secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func serveCSS(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "max-age=300")
	http.ServeFileFS(w, r, files, "templates/console.css")
}
