package ingest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/heraldhq/herald/internal/apikey"
	"github.com/heraldhq/herald/internal/openapitest"
	"github.com/heraldhq/herald/internal/stacktest"
)

// bomb is the template of the security review: it ranges 9·10^18 times and prints 900 KB
// each time. It used to be stored, and the next POST using it never returned.
const bomb = `{{range 9000000000000000000}}{{printf "%0900000d" 0}}{{end}}`

// TestPutRefusesUnboundedTemplate checks that content that could run unbounded is refused at
// PUT with 422 template_not_allowed naming the field and the reason, and nothing is stored.
func TestPutRefusesUnboundedTemplate(t *testing.T) {
	e := newEnv(t)
	e.templateWith("keep", "x", map[string]any{"SMS": map[string]any{"default": sms("v1")}}, "SMS")
	for name, text := range map[string]string{
		"new":       bomb,
		"keep":      bomb,
		"width":     `{{printf "%0900000d" 0}}`,
		"nested":    strings.Repeat("{{if .a}}", 11) + strings.Repeat("{{end}}", 11),
		"define":    `{{define "x"}}{{template "x"}}{{end}}{{template "x"}}`,
		"range-len": `{{range len .items}}x{{end}}`,
	} {
		res := e.do(http.MethodPut, "/api/templates/"+name, map[string]any{
			"category": "x", "channels": []string{"SMS"}, "content": map[string]any{"SMS": map[string]any{"default": sms(text)}},
		}, nil)
		p := requireProblem(t, res, http.StatusUnprocessableEntity, codeTemplateNotAllowed)
		require.Equal(t, []string{"content"}, fields(p), "body: %s", res.body)
		require.Contains(t, p["detail"], "SMS.default.text", name)
	}
	res := e.do(http.MethodPut, "/api/templates/new", map[string]any{
		"category": "x", "channels": []string{"SMS"}, "content": map[string]any{"SMS": map[string]any{"default": sms(bomb)}},
	}, nil)
	require.Contains(t, res.json(t)["detail"], "range over the number")
	require.Equal(t, http.StatusNotFound, e.do(http.MethodGet, "/api/templates/new", nil, nil).status)
	got := e.do(http.MethodGet, "/api/templates/keep", nil, nil).json(t)
	require.Equal(t, map[string]any{"SMS": map[string]any{"default": sms("v1")}}, got["content"])
}

// TestPostWithStoredBombAnswers stores the bomb as a template stored before the limits
// existed: a POST using it is answered 422 at once instead of never returning.
func TestPostWithStoredBombAnswers(t *testing.T) {
	e := newEnv(t)
	e.user(1, map[string]any{"phone": "+15551230001"})
	_, err := e.pool.Exec(context.Background(), `INSERT INTO template (name, category, channels, content)
		VALUES ('bomb', 'x', '{SMS}', jsonb_build_object('SMS', jsonb_build_object('default', jsonb_build_object('text', $1::text))))`, bomb)
	require.NoError(t, err)

	done := make(chan response, 1)
	go func() {
		res, _ := e.send(http.MethodPost, "/api/notifications",
			map[string]any{"userId": 1, "template": "bomb", "channels": []string{"SMS"}},
			map[string]string{"Idempotency-Key": "bomb-1"})
		done <- res
	}()
	select {
	case res := <-done:
		p := requireProblem(t, res, http.StatusUnprocessableEntity, codeTemplateRenderFailed)
		require.Equal(t, []string{"template"}, fields(p))
	case <-time.After(15 * time.Second):
		t.Fatal("POST with the stored bomb did not return")
	}
	n, d := e.rows()
	require.Zero(t, n)
	require.Zero(t, d)
}

// TestAcceptRendersOutsideTransaction checks that accepting a notification, render included,
// never opens a transaction block: every statement of a POST runs on an idle connection
// (the read, the insert), so a render never holds one open.
func TestAcceptRendersOutsideTransaction(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(stacktest.PostgresURL(t))
	require.NoError(t, err)
	rec := &txRecorder{}
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	api, err := New(Config{}, pool, zaptest.NewLogger(t))
	require.NoError(t, err)
	srv := httptest.NewServer(openapitest.Handler(t, api.Handler()))
	t.Cleanup(srv.Close)
	e := &env{t: t, pool: pool, srv: srv}
	c, err := apikey.CreateAPIClient(context.Background(), pool, "test", apikey.AllScopes())
	require.NoError(t, err)
	e.clientID, e.key = c.ID, c.Key
	e.templateWith("order", "orders", map[string]any{"SMS": map[string]any{"default": sms("Order {{.order.id}}")}}, "SMS")
	e.user(1, map[string]any{"phone": "+15551230001"})

	rec.start()
	res := e.post("tx-1", map[string]any{"userId": 1, "template": "order", "channels": []string{"SMS"},
		"payload": map[string]any{"order": map[string]any{"id": 7}}})
	require.Equal(t, http.StatusAccepted, res.status, "%s", res.body)
	res = e.post("tx-2", map[string]any{"userId": 1, "template": "order", "channels": []string{"SMS"}})
	requireProblem(t, res, http.StatusUnprocessableEntity, codeTemplateRenderFailed)
	statements, inTx := rec.stop()
	require.NotEmpty(t, statements)
	require.Empty(t, inTx, "statements sent inside a transaction block: %v", statements)
}

// txRecorder is a pgx tracer that records the statements sent while it runs, and those
// sent on a connection with a transaction block open or that open one.
type txRecorder struct {
	mu         sync.Mutex
	on         bool
	statements []string
	inTx       []string
}

func (r *txRecorder) start() { r.mu.Lock(); r.on = true; r.mu.Unlock() }

func (r *txRecorder) stop() (statements, inTx []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.statements, r.inTx
}

func (r *txRecorder) record(conn *pgx.Conn, sql string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.on {
		return
	}
	sql = strings.Join(strings.Fields(sql), " ")
	r.statements = append(r.statements, sql)
	upper := strings.ToUpper(sql)
	if conn.PgConn().TxStatus() != 'I' || strings.HasPrefix(upper, "BEGIN") || strings.HasPrefix(upper, "START TRANSACTION") {
		r.inTx = append(r.inTx, sql)
	}
}

func (r *txRecorder) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	r.record(conn, data.SQL)
	return ctx
}

func (r *txRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *txRecorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (r *txRecorder) TraceBatchQuery(_ context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	r.record(conn, data.SQL)
}

func (r *txRecorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
