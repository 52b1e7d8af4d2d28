package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/heraldhq/herald"
)

// admissionGate admits POST /api/notifications before anything else runs: before the request
// span, the API key check and the body's decoding. Under a burst of ten times what the machine
// accepts, a request refused after that work cost as much CPU as one accepted, and a request
// queued for CPU behind thousands of others before it even reached admission, so that the
// admission wait bounded nothing (a NORMAL POST's answer took seconds). The gate stamps the
// request's arrival (the admission wait counts from it), reads the body (at most
// MaxBodyBytes + 1; it is small) and reads its priority alone, then takes the slot; a refusal
// is written at once, a 503 overloaded with Retry-After and nothing else done. The rest of the
// request runs holding the slot, and the full decode still judges the body: a body whose
// priority cannot be read is admitted as NORMAL, the default, and then refused 400.
func (a *API) admissionGate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/notifications" {
			next.ServeHTTP(w, r)
			return
		}
		ctx := context.WithValue(r.Context(), arrivalKey{}, time.Now())
		body, err := io.ReadAll(io.LimitReader(r.Body, a.cfg.MaxBodyBytes+1))
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), errReader{err}), r.Body}
		prio := sniffPriority(body)
		release, err := a.admit.admit(ctx, prio)
		if err != nil {
			a.fail(w, r.WithContext(ctx), err)
			return
		}
		defer release()
		ctx = a.admit.withAnswerBy(ctx, prio)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// sniffPriority is the priority field of a notification body, or the default NORMAL when it
// cannot be read: the same JSON decoder as the full decode, so both read the same value.
func sniffPriority(body []byte) herald.Priority {
	var v struct {
		Priority string `json:"priority"`
	}
	if json.Unmarshal(body, &v) != nil {
		return herald.PriorityNormal
	}
	p, err := herald.ParsePriority(v.Priority)
	if err != nil {
		return herald.PriorityNormal
	}
	return p
}

// errReader ends a body whose read failed with the same error, for the full decode to report;
// a nil error is a plain end of body.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

type arrivalKey struct{}

// arrivalFrom is when the gate saw the request arrive; now for a request that did not pass it.
func arrivalFrom(ctx context.Context) time.Time {
	if t, ok := ctx.Value(arrivalKey{}).(time.Time); ok {
		return t
	}
	return time.Now()
}
