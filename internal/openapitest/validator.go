// Package openapitest holds herald's HTTP API to its description (docs/openapi.yaml, embedded
// as herald.OpenAPI): every exchange a test makes through Handler or Transport is checked
// against it with kin-openapi's openapi3filter, and a departure fails the test. So the
// description cannot drift from the handlers without a test failing.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/heraldhq/herald"
)

// Validator checks HTTP exchanges against the description. It is safe for concurrent use.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
}

// Load parses and validates herald's description.
func Load() (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(herald.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("load docs/openapi.yaml: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("validate docs/openapi.yaml: %w", err)
	}
	// The servers name make run's address; the tests' servers listen elsewhere. Route on
	// paths alone.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route docs/openapi.yaml: %w", err)
	}
	return &Validator{doc: doc, router: router}, nil
}

// Shared is the Validator every test of a process uses: the description is parsed once.
var Shared = sync.OnceValues(Load)

// Doc is the loaded description.
func (v *Validator) Doc() *openapi3.T { return v.doc }

// Exchange is one request and its answer, bodies read in full.
type Exchange struct {
	Request     *http.Request
	RequestBody []byte
	Status      int
	Header      http.Header
	Body        []byte
}

// ErrNotDescribed is returned by Check for a path the description does not have.
var ErrNotDescribed = errors.New("the description has no such path")

// Check returns how the exchange departs from the description, or nil. The rules:
//
//   - Every answer matches the description of its operation and status: a status the
//     operation does not list, a header it requires missing, a body that breaks its schema
//     (closed objects: a member it does not list) all fail.
//   - A request the description refuses must be refused (4xx): a handler that accepts what
//     the description says is invalid is looser than its contract.
//   - A request the description accepts must not be refused as malformed (400
//     malformed_json or unknown_field, 415): the description would then promise members or
//     media types the handler does not take. It may be refused for a rule a schema cannot
//     say (400 validation_failed: expiresAt after sendAt, a template that must exist).
//   - A path the description does not have must answer 404 not_found; a method a described
//     path does not have 405 method_not_allowed.
func (v *Validator) Check(ctx context.Context, x Exchange) error {
	route, params, err := v.router.FindRoute(x.Request)
	if err != nil {
		return v.checkUnrouted(x, err)
	}
	reqErr := v.checkRequest(ctx, x, route, params)
	var errs []error
	if err := v.checkResponse(ctx, x, route, params); err != nil {
		errs = append(errs, fmt.Errorf("the answer does not match the description: %w", err))
	}
	code := problemCode(x)
	switch {
	case reqErr != nil && (x.Status < 400 || x.Status > 499):
		errs = append(errs, fmt.Errorf("the description refuses this request, the handler answered %d: %w", x.Status, reqErr))
	case reqErr == nil && refusedAsMalformed(x, route, code):
		errs = append(errs, fmt.Errorf("the description accepts this request, the handler refused it as %d %s", x.Status, code))
	}
	return errors.Join(errs...)
}

func (v *Validator) checkRequest(ctx context.Context, x Exchange, route *routers.Route, params map[string]string) error {
	req := x.Request.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(x.RequestBody))
	opts := &openapi3filter.Options{MultiError: true, AuthenticationFunc: bearerPresent}
	opts.WithCustomSchemaErrorFunc(shortSchemaError)
	return openapi3filter.ValidateRequest(ctx, &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route, Options: opts,
	})
}

func (v *Validator) checkResponse(ctx context.Context, x Exchange, route *routers.Route, params map[string]string) error {
	if x.Request.Method == http.MethodHead {
		// openapi3filter does not look at HEAD answers; the status must be listed all the same.
		if route.Operation.Responses.Status(x.Status) == nil {
			return fmt.Errorf("status %d is not listed for HEAD %s", x.Status, route.Path)
		}
		return nil
	}
	req := x.Request.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(x.RequestBody))
	opts := &openapi3filter.Options{MultiError: true, IncludeResponseStatus: true}
	opts.WithCustomSchemaErrorFunc(shortSchemaError)
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 x.Status,
		Header:                 x.Header,
		Options:                opts,
	}
	in.SetBodyBytes(x.Body)
	return openapi3filter.ValidateResponse(ctx, in)
}

// checkUnrouted checks the answer to a request the description has no operation for.
func (v *Validator) checkUnrouted(x Exchange, routeErr error) error {
	want, name := http.StatusNotFound, "NotFound"
	if errors.Is(routeErr, routers.ErrMethodNotAllowed) {
		want, name = http.StatusMethodNotAllowed, "MethodNotAllowed"
	}
	if x.Status != want {
		return fmt.Errorf("%w (%v); the handler answered %d instead of %d", ErrNotDescribed, routeErr, x.Status, want)
	}
	res := v.doc.Components.Responses[name].Value
	mt := res.Content.Get(mediaType(x.Header))
	if mt == nil {
		return fmt.Errorf("the %d answer has Content-Type %q, the description application/problem+json", x.Status, x.Header.Get("Content-Type"))
	}
	var body any
	if err := json.Unmarshal(x.Body, &body); err != nil {
		return fmt.Errorf("the %d answer is not JSON: %w", x.Status, err)
	}
	if err := mt.Schema.Value.VisitJSON(body, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors()); err != nil {
		return fmt.Errorf("the %d answer does not match components/responses/%s: %w", x.Status, name, err)
	}
	return nil
}

// refusedAsMalformed reports whether the handler refused, as malformed, a request whose
// malformation a description can say. It cannot say two things the handlers refuse: data
// after the JSON object (openapi3filter's decoder stops after the first value), and a
// charset parameter other than utf-8.
func refusedAsMalformed(x Exchange, route *routers.Route, code string) bool {
	switch {
	case code == "unknown_field":
		return true
	case code == "malformed_json":
		return json.Valid(x.RequestBody)
	case x.Status == http.StatusUnsupportedMediaType:
		rb := route.Operation.RequestBody
		return rb != nil && rb.Value != nil && rb.Value.Content.Get(requestMediaType(x.Request)) != nil &&
			!strings.Contains(strings.ToLower(x.Request.Header.Get("Content-Type")), "charset")
	}
	return false
}

func requestMediaType(r *http.Request) string {
	mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	return strings.TrimSpace(strings.ToLower(mt))
}

// shortSchemaError is a schema error without the schema and value it would print: the
// failure message quotes the exchange, and a schema dump of a whole answer buries the reason.
func shortSchemaError(err *openapi3.SchemaError) string {
	if err.Origin != nil {
		return err.Origin.Error() // the JSON Schema 2020-12 validator's reasons, with their paths
	}
	if c := err.Unwrap(); c != nil {
		return c.Error()
	}
	reason := err.Reason
	if reason == "" {
		reason = "does not match the schema's " + err.SchemaField
	}
	if p := err.JSONPointer(); len(p) > 0 && !strings.Contains(reason, "at '") {
		return "at /" + strings.Join(p, "/") + ": " + reason
	}
	return reason
}

func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	scheme, key, ok := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return errors.New("no Authorization: Bearer key")
	}
	return nil
}

// problemCode is the code of a problem answer, or "".
func problemCode(x Exchange) string {
	if mediaType(x.Header) != "application/problem+json" {
		return ""
	}
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(x.Body, &p)
	return p.Code
}

func mediaType(h http.Header) string {
	mt, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.TrimSpace(strings.ToLower(mt))
}
