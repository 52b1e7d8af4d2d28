package openapitest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// Transport is Handler from the client's side, for tests that call a herald process over
// the network: rt sends each request, and every exchange with an operation of the
// description is checked; report gets the failure message of each departure. Requests the
// description has no operation for pass unchecked (the console, the admin listener's
// /metrics, a probe of a path the API listener must not serve): Handler checks the API's own
// 404 and 405 answers. So does net/http's own 404 page: the answer of a listener that does not
// serve the API at all (the admin listener, herald serve without the ingest role). That a
// path of the API passes unchecked only because the description lacks it cannot happen:
// ingest's TestEveryRouteIsDescribed holds the router and the description to the same paths.
func Transport(rt http.RoundTripper, report func(msg string)) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		v, err := Shared()
		if err != nil {
			return nil, err
		}
		if _, _, err := v.router.FindRoute(req); err != nil {
			return rt.RoundTrip(req)
		}
		var body []byte
		if req.Body != nil {
			if body, err = io.ReadAll(req.Body); err != nil {
				return nil, fmt.Errorf("openapitest: read request body: %w", err)
			}
			_ = req.Body.Close()
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		answer, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("openapitest: read answer: %w", err)
		}
		resp.Body = io.NopCloser(bytes.NewReader(answer))
		x := Exchange{Request: req, RequestBody: body, Status: resp.StatusCode, Header: resp.Header, Body: answer}
		if notServed(x) {
			return resp, nil
		}
		if err := v.Check(req.Context(), x); err != nil {
			report(describe(x, err))
		}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// notServed reports whether the answer is net/http's 404 page rather than the API's.
func notServed(x Exchange) bool {
	return x.Status == http.StatusNotFound && mediaType(x.Header) == "text/plain" &&
		bytes.Equal(bytes.TrimSpace(x.Body), []byte("404 page not found"))
}
