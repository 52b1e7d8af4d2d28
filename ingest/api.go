package ingest

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/gorilla/mux"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/recipient"
	"github.com/heraldhq/herald/receipts"
)

const instrumentationName = "github.com/heraldhq/herald/ingest"

// API serves herald's HTTP API. Create it with New and mount Handler on an http.Server.
type API struct {
	cfg    Config
	pool   *pgxpool.Pool
	log    *zap.Logger
	tracer trace.Tracer
	// migrated latches true once /readyz saw no pending migration: a running process never
	// loses migrations, and the check takes the migration lock.
	migrated  atomic.Bool
	keys      *authCache
	admit     *admission
	available recipient.ChannelSet
	high      *highPublisher // nil: HIGH deliveries reach Kafka through the relay only
	highPool  *pgxpool.Pool  // HIGH POSTs' own connections (HighPool); nil: the API's pool
	// acceptPool is NORMAL and LOW POSTs' own connections (AcceptPool); nil: the API's pool.
	acceptPool *pgxpool.Pool
	// readyChecks are the other dependencies of /readyz (ReadyWhen), set before serving.
	readyChecks []readyCheck
}

// New returns the API. pool must point at a migrated herald database.
func New(cfg Config, pool *pgxpool.Pool, log *zap.Logger, opts ...Option) (*API, error) {
	if pool == nil {
		return nil, errors.New("ingest: nil pool")
	}
	cfg = cfg.withDefaults(int(pool.Config().MaxConns))
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	admit, err := newAdmission(cfg.AdmissionSlots, cfg.AdmissionHighReserve, cfg.AdmissionWait, otel.Meter(instrumentationName))
	if err != nil {
		return nil, err
	}
	a := &API{
		cfg:       cfg,
		pool:      pool,
		log:       log.With(zap.String("component", "ingest")),
		tracer:    otel.Tracer(instrumentationName),
		keys:      newAuthCache(cfg.AuthCacheTTL, authCacheEntries),
		admit:     admit,
		available: recipient.NewChannelSet(cfg.Channels),
	}
	for _, o := range opts {
		o(a)
	}
	if a.high != nil {
		if a.high.published, err = otel.Meter(instrumentationName).Int64Counter("herald.ingest.high_published",
			metric.WithDescription("HIGH deliveries published to Kafka right after their accept committed, by outcome")); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Handler returns the HTTP handler serving every route of the API. Each request runs in
// an OpenTelemetry server span (otelhttp) that continues an incoming W3C traceparent; a
// POST /api/notifications is admitted before that (admission_gate.go).
func (a *API) Handler() http.Handler {
	traced := otelhttp.NewHandler(a.router(), "ingest",
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }),
	)
	return a.admissionGate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Pattern != "" {
			// The pattern of an enclosing http.ServeMux ("/" in herald serve) is not the
			// route: otelhttp would name the span and label the metrics with it, over the
			// route template nameSpan gives.
			r = r.WithContext(r.Context())
			r.Pattern = ""
		}
		traced.ServeHTTP(w, r)
	}))
}

// router routes every path of the API (docs/openapi.yaml describes each; a test walks it).
func (a *API) router() *mux.Router {
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeProblem(w, newAPIError(http.StatusNotFound, codeNotFound, "no such resource"))
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeProblem(w, newAPIError(http.StatusMethodNotAllowed, codeMethodNotAllowed, "method not allowed on this resource"))
	})
	r.Use(nameSpan)

	r.HandleFunc("/healthz", a.healthz).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/readyz", a.readyz).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/openapi.yaml", serveOpenAPI).Methods(http.MethodGet, http.MethodHead)

	// The API routes sit on the root router, each behind authorize: a gorilla/mux subrouter
	// answers 404 instead of 405 for a known path with the wrong method.
	for _, rt := range routes(a) {
		r.Handle(rt.path, a.authorize(rt.handler, rt.scopes...)).Methods(rt.method)
	}
	// The providers' receipts: authenticated by each provider's signature, never by a key.
	for _, rt := range receipts.Endpoints {
		r.Handle(rt.Path, a.receiptHandler(rt.Key())).Methods(rt.Method)
	}
	return r
}

// apiRoute is one API route and the scopes that may call it (any one of them suffices;
// apikey.ScopeOperator suffices for every route). The table is documented in docs/api.md and
// docs/security.md.
type apiRoute struct {
	method, path string
	handler      http.HandlerFunc
	scopes       []apikey.Scope
}

// endpointReaders may read webhook endpoints and their attempts: a reading service, and the
// one that manages them.
var endpointReaders = []apikey.Scope{apikey.ScopeNotificationsRead, apikey.ScopeWebhooksWrite}

func routes(a *API) []apiRoute {
	return []apiRoute{
		{http.MethodPost, "/api/notifications", a.postNotification, []apikey.Scope{apikey.ScopeNotificationsSend}},
		{http.MethodGet, "/api/notifications/{id}", a.getNotification, []apikey.Scope{apikey.ScopeNotificationsRead}},
		{http.MethodPut, "/api/users/{userId}", a.putUser, []apikey.Scope{apikey.ScopeUsersWrite}},
		{http.MethodGet, "/api/users/{userId}", a.getUser, []apikey.Scope{apikey.ScopeUsersRead}},
		{http.MethodPut, "/api/users/{userId}/preferences", a.putPreferences, []apikey.Scope{apikey.ScopeUsersWrite}},
		{http.MethodGet, "/api/users/{userId}/preferences", a.getPreferences, []apikey.Scope{apikey.ScopeUsersRead}},
		{http.MethodPut, "/api/templates/{name}", a.putTemplate, []apikey.Scope{apikey.ScopeTemplatesWrite}},
		// A template editor reads what it writes; a sending service may read the template it
		// sends (its channels and variables). Templates hold no personal data.
		{http.MethodGet, "/api/templates/{name}", a.getTemplate, []apikey.Scope{apikey.ScopeNotificationsSend, apikey.ScopeTemplatesWrite}},
		{http.MethodPost, "/api/campaigns", a.postCampaign, []apikey.Scope{apikey.ScopeCampaignsWrite}},
		{http.MethodGet, "/api/campaigns/{id}", a.getCampaign, []apikey.Scope{apikey.ScopeNotificationsRead}},
		{http.MethodPost, "/api/campaigns/{id}/recipients", a.postRecipients, []apikey.Scope{apikey.ScopeCampaignsWrite}},
		{http.MethodPost, "/api/campaigns/{id}/start", a.postStart, []apikey.Scope{apikey.ScopeCampaignsWrite}},
		{http.MethodPost, "/api/campaigns/{id}/cancel", a.postCancel, []apikey.Scope{apikey.ScopeCampaignsWrite}},
		{http.MethodPost, "/api/redrives", a.postRedrive, []apikey.Scope{apikey.ScopeOperator}},
		{http.MethodGet, "/api/redrives/{id}", a.getRedrive, []apikey.Scope{apikey.ScopeOperator}},
		// Client webhook endpoints (webhook_endpoints.go): a client sees only its own.
		{http.MethodPost, "/api/webhook-endpoints", a.postEndpoint, []apikey.Scope{apikey.ScopeWebhooksWrite}},
		{http.MethodGet, "/api/webhook-endpoints", a.listEndpoints, endpointReaders},
		{http.MethodGet, "/api/webhook-endpoints/{id}", a.getEndpoint, endpointReaders},
		{http.MethodDelete, "/api/webhook-endpoints/{id}", a.deleteEndpoint, []apikey.Scope{apikey.ScopeWebhooksWrite}},
		{http.MethodGet, "/api/webhook-endpoints/{id}/attempts", a.getEndpointAttempts, endpointReaders},
		{http.MethodPost, "/api/webhook-endpoints/{id}/replay", a.postReplay, []apikey.Scope{apikey.ScopeWebhooksWrite}},
		{http.MethodPost, "/api/webhook-endpoints/{id}/enable", a.enableEndpoint, []apikey.Scope{apikey.ScopeWebhooksWrite}},
	}
}

// nameSpan names the request span after the matched route ("POST /api/notifications"), which
// otelhttp cannot know because it runs before the router, and gives otelhttp's request
// metrics (http_server_request_duration_seconds) the route template as http.route: a
// bounded label, never the raw path with its ids.
func nameSpan(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if route := mux.CurrentRoute(r); route != nil {
			if tmpl, err := route.GetPathTemplate(); err == nil {
				trace.SpanFromContext(r.Context()).SetName(r.Method + " " + tmpl)
				trace.SpanFromContext(r.Context()).SetAttributes(semconv.HTTPRoute(tmpl))
				if l, ok := otelhttp.LabelerFromContext(r.Context()); ok {
					l.Add(semconv.HTTPRoute(tmpl))
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// acceptsPriority refuses a notification or campaign of a priority this API does not accept
// (Config.Priorities), before anything is read or written.
func (a *API) acceptsPriority(p herald.Priority) error {
	if slices.Contains(a.cfg.Priorities, p) {
		return nil
	}
	return newAPIError(http.StatusUnprocessableEntity, codePriorityNotAccepted,
		fmt.Sprintf("this herald process accepts %s only; send %s to the API of the other processes", joinPriorities(a.cfg.Priorities), p))
}

func joinPriorities(ps []herald.Priority) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// fail answers err: an *apiError as its problem document, anything else as a logged 500.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		writeProblem(w, ae)
		return
	}
	a.internalError(w, r, err)
}

func (a *API) internalError(w http.ResponseWriter, r *http.Request, err error) {
	if reason, ok := databaseUnavailable(err); ok && r.Context().Err() == nil {
		// The driver's error names the host, user and database: the reason only is logged.
		a.log.Warn("database unavailable", zap.String("method", r.Method), zap.String("route", routeOf(r)), zap.String("reason", reason))
		trace.SpanFromContext(r.Context()).RecordError(errors.New("database unavailable: " + reason))
		writeProblem(w, unavailable())
		return
	}
	if r.Context().Err() != nil {
		// The client went away; nobody reads the answer.
		a.log.Debug("request canceled", zap.String("method", r.Method), zap.Error(err))
	} else {
		a.log.Error("request failed", zap.String("method", r.Method), zap.String("route", routeOf(r)), zap.Error(err))
	}
	trace.SpanFromContext(r.Context()).RecordError(err)
	writeProblem(w, newAPIError(http.StatusInternalServerError, codeInternal, "internal error"))
}

func routeOf(r *http.Request) string {
	if route := mux.CurrentRoute(r); route != nil {
		if tmpl, err := route.GetPathTemplate(); err == nil {
			return tmpl
		}
	}
	return ""
}

// receiptHandler serves a receipt endpoint with its configured handler, or 404 when the
// provider has none (not configured, or no secret to check its signature with).
func (a *API) receiptHandler(key string) http.Handler {
	if h := a.cfg.Receipts[key]; h != nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeProblem(w, newAPIError(http.StatusNotFound, codeNotFound, "no receipts are taken from this provider"))
	})
}
