package ingest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gorilla/mux"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/openapitest"
	"github.com/heraldhq/herald/receipts"
)

// pendingExtension marks an operation of docs/openapi.yaml that is agreed but not routed yet.
// Once its route lands the marker must go: a routed operation marked pending fails below.
const pendingExtension = "x-herald-pending"

// TestEveryRouteIsDescribed walks the router: every route it has is an operation of
// docs/openapi.yaml with the scopes of the route table, and every operation of the
// description is routed (but those marked x-herald-pending, which must not be).
func TestEveryRouteIsDescribed(t *testing.T) {
	v, err := openapitest.Shared()
	require.NoError(t, err)
	a := &API{}

	routed := map[string]bool{}
	err = a.router().Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		path, err := route.GetPathTemplate()
		if err != nil {
			return err
		}
		methods, err := route.GetMethods()
		if err != nil {
			return err
		}
		for _, m := range methods {
			routed[m+" "+path] = true
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, routed)

	described := map[string]*openapi3.Operation{}
	for path, item := range v.Doc().Paths.Map() {
		for method, op := range item.Operations() {
			described[method+" "+path] = op
		}
	}
	for _, r := range sortedKeys(routed) {
		if described[r] == nil {
			t.Errorf("%s is routed but not in docs/openapi.yaml", r)
		}
	}
	for _, d := range sortedKeys(described) {
		pending, _ := described[d].Extensions[pendingExtension].(bool)
		switch {
		case routed[d] && pending:
			t.Errorf("%s is routed: remove %s: true from its operation in docs/openapi.yaml", d, pendingExtension)
		case !routed[d] && !pending:
			t.Errorf("%s is in docs/openapi.yaml but not routed (mark it %s: true if it is agreed but not built)", d, pendingExtension)
		}
	}

	// Scopes: an /api operation lists one requirement per scope of its route (any one
	// suffices); every other operation needs no key, said explicitly (security: []).
	want := map[string][]string{}
	for _, rt := range routes(a) {
		for _, s := range rt.scopes {
			want[rt.method+" "+rt.path] = append(want[rt.method+" "+rt.path], string(s))
		}
	}
	for d, op := range described {
		require.NotNil(t, op.Security, "%s: no security in docs/openapi.yaml (security: [] for none)", d)
		var got []string
		for _, req := range *op.Security {
			require.Len(t, req, 1, "%s: one scheme per requirement", d)
			scopes, ok := req["apiKey"]
			require.True(t, ok, "%s: the scheme is apiKey", d)
			require.Len(t, scopes, 1, "%s: one scope per requirement: requirements are alternatives", d)
			got = append(got, scopes[0])
		}
		if !routed[d] {
			continue // pending: its route's scopes are checked once it lands
		}
		slices.Sort(got)
		w := slices.Clone(want[d])
		slices.Sort(w)
		require.Equal(t, w, got, "%s: the scopes of docs/openapi.yaml are not the route table's", d)
	}
}

// TestDescriptionListsEveryProblemCode parses problem.go: every code constant is a value of
// ProblemCode in docs/openapi.yaml, and the description lists no code the handlers lack.
func TestDescriptionListsEveryProblemCode(t *testing.T) {
	v, err := openapitest.Shared()
	require.NoError(t, err)
	f, err := parser.ParseFile(token.NewFileSet(), "problem.go", nil, 0)
	require.NoError(t, err)
	var codes []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || !strings.HasPrefix(vs.Names[0].Name, "code") || len(vs.Values) != 1 {
			return true
		}
		if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			s, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			codes = append(codes, s)
		}
		return true
	})
	require.NotEmpty(t, codes)
	var described []string
	for _, e := range v.Doc().Components.Schemas["ProblemCode"].Value.Enum {
		described = append(described, e.(string))
	}
	slices.Sort(codes)
	slices.Sort(described)
	require.Equal(t, codes, described, "problem.go's codes and ProblemCode's enum in docs/openapi.yaml")
}

// TestServesItsDescription: GET /openapi.yaml answers the embedded file without a key.
func TestServesItsDescription(t *testing.T) {
	e := newEnv(t)
	res := e.do(http.MethodGet, "/openapi.yaml", nil, map[string]string{"Authorization": ""})
	require.Equal(t, http.StatusOK, res.status)
	require.Equal(t, "application/yaml", res.header.Get("Content-Type"))
	require.Equal(t, herald.OpenAPI(), res.body)
	require.Contains(t, string(res.body), "openapi: 3.1.0")
	head := e.do(http.MethodHead, "/openapi.yaml", nil, map[string]string{"Authorization": ""})
	require.Equal(t, http.StatusOK, head.status)
	require.Empty(t, head.body)
	require.Equal(t, strconv.Itoa(len(herald.OpenAPI())), head.header.Get("Content-Length"))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestReceiptProblemCodeIsListed: the code package receipts answers a bad signature with is
// the one problem.go lists.
func TestReceiptProblemCodeIsListed(t *testing.T) {
	require.Equal(t, codeBadSignature, receipts.ProblemBadSignature)
	require.Equal(t, codeBodyTooLarge, receipts.ProblemBodyTooLarge)
}

// TestReceiptsOfAProviderNotConfigured: a receipt endpoint of a provider herald takes no
// receipts from answers 404 not_found, as described (the validating server checks it).
func TestReceiptsOfAProviderNotConfigured(t *testing.T) {
	e := newEnv(t)
	res := e.do(http.MethodGet, receipts.VonagePath+"?client-ref=x&status=delivered", nil, map[string]string{"Authorization": ""})
	require.Equal(t, http.StatusNotFound, res.status)
	require.Equal(t, codeNotFound, res.json(t)["code"])
}
