package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/openapitest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// spans records every span of the package's tests; tests look up their own by trace id.
var spans = tracetest.NewSpanRecorder()

func TestMain(m *testing.M) {
	// A real SDK provider, as main installs, so that requests without a traceparent start a
	// new root trace.
	// The span recorder is a synchronous processor: the provider starts no goroutine.
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	goleak.VerifyTestMain(m)
}

// unrecorded installs, for the rest of the test, an SDK tracer provider that records
// nothing: long runs (fuzzing, benchmarks) would otherwise pile every span up in spans. It
// must run before the env is built, which captures the provider.
func unrecorded(t testing.TB) {
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider())
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
}

// env is one test's API on its own fresh database, with one API client.
type env struct {
	t        testing.TB
	api      *API
	pool     *pgxpool.Pool
	srv      *httptest.Server
	key      string
	clientID string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, Config{}, zaptest.NewLogger(t))
}

// newEnvWith is newEnv with a configuration, a logger and options.
func newEnvWith(t testing.TB, cfg Config, log *zap.Logger, opts ...Option) *env {
	t.Helper()
	pool := stacktest.Postgres(t)
	api, err := New(cfg, pool, log, opts...)
	require.NoError(t, err)
	srv := httptest.NewServer(openapitest.Handler(t, api.Handler()))
	t.Cleanup(srv.Close)
	e := &env{t: t, api: api, pool: pool, srv: srv}
	c, err := apikey.CreateAPIClient(context.Background(), pool, "test", apikey.AllScopes())
	require.NoError(t, err)
	e.clientID, e.key = c.ID, c.Key
	return e
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a generic value.
func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal(r.body, &v), "body: %s", r.body)
	return v
}

// do sends a request with the env's key (unless headers set Authorization, "" removes it)
// and a JSON content type when there is a body.
func (e *env) do(method, path string, body any, headers map[string]string) response {
	e.t.Helper()
	res, err := e.send(method, path, body, headers)
	require.NoError(e.t, err)
	return res
}

// send is do without assertions, for use off the test goroutine.
func (e *env) send(method, path string, body any, headers map[string]string) (response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return response{}, err
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Authorization", "Bearer "+e.key)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}, err
}

// postAsync sends POST /api/notifications off the test goroutine.
func (e *env) postAsync(key string, body any) (response, error) {
	return e.send(http.MethodPost, "/api/notifications", body, map[string]string{"Idempotency-Key": key})
}

// post sends POST /api/notifications with an Idempotency-Key.
func (e *env) post(key string, body any) response {
	e.t.Helper()
	return e.do(http.MethodPost, "/api/notifications", body, map[string]string{"Idempotency-Key": key})
}

// template registers a template with the given channels and, for each, default-locale
// content that uses no payload variable.
func (e *env) template(name string, category string, channels ...string) {
	e.t.Helper()
	content := map[string]any{}
	for _, c := range channels {
		content[c] = map[string]any{"default": plainContent[c]}
	}
	e.templateWith(name, category, content, channels...)
}

// plainContent is content per channel without payload variables.
var plainContent = map[string]any{
	"PUSH":    map[string]any{"title": "Hi", "body": "hi"},
	"EMAIL":   map[string]any{"subject": "Hi", "text": "hi"},
	"SMS":     map[string]any{"text": "hi"},
	"WEBHOOK": map[string]any{"json": map[string]any{"text": "hi"}},
}

// templateWith registers a template with the given content.
func (e *env) templateWith(name, category string, content map[string]any, channels ...string) {
	e.t.Helper()
	res := e.do(http.MethodPut, "/api/templates/"+name, map[string]any{
		"category": category, "channels": channels, "content": content,
	}, nil)
	require.Equal(e.t, http.StatusOK, res.status, "%s", res.body)
}

// user stores a contact profile.
func (e *env) user(id int64, profile map[string]any) {
	e.t.Helper()
	res := e.do(http.MethodPut, "/api/users/"+itoa(id), profile, nil)
	require.Equal(e.t, http.StatusOK, res.status, "%s", res.body)
}

// rows counts notification and delivery rows.
func (e *env) rows() (notifications, deliveries int) {
	e.t.Helper()
	err := e.pool.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM notification), (SELECT count(*) FROM delivery)`).Scan(&notifications, &deliveries)
	require.NoError(e.t, err)
	return notifications, deliveries
}

// requireProblem checks a problem+json answer with the status and code.
func requireProblem(t testing.TB, res response, status int, code string) map[string]any {
	t.Helper()
	require.Equal(t, status, res.status, "body: %s", res.body)
	require.Equal(t, "application/problem+json", res.header.Get("Content-Type"))
	p := res.json(t)
	require.Equal(t, code, p["code"], "body: %s", res.body)
	require.Equal(t, float64(status), p["status"])
	require.Equal(t, "urn:herald:problem:"+code, p["type"])
	require.NotEmpty(t, p["title"])
	return p
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// serve runs one request through h without a network.
func serve(h http.Handler, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}
