package openapitest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Handler serves next and checks every exchange against the description; a departure fails
// t with the request, the answer and every reason. Wrap the handler a test server serves:
//
//	srv := httptest.NewServer(openapitest.Handler(t, api.Handler()))
//
// Answers are buffered until the check is done, so Handler suits the API's JSON answers,
// not streams.
func Handler(t testing.TB, next http.Handler) http.Handler {
	t.Helper()
	v, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "openapitest: read request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		_ = r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)

		x := Exchange{Request: r, RequestBody: body, Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
		if err := v.Check(r.Context(), x); err != nil {
			t.Errorf("%s", describe(x, err))
		}
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// describe is the failure message of a departing exchange.
func describe(x Exchange, err error) string {
	return fmt.Sprintf("openapitest: %s %s does not match docs/openapi.yaml:\n%v\nrequest body: %s\nanswer: %d %s\n%s",
		x.Request.Method, x.Request.URL.RequestURI(), err, clip(x.RequestBody), x.Status, x.Header.Get("Content-Type"), clip(x.Body))
}

func clip(b []byte) string {
	const most = 2048
	if len(b) > most {
		return fmt.Sprintf("%s… (%d bytes)", b[:most], len(b))
	}
	return string(b)
}
