package receipts

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

// vonageResults maps a Vonage DLR status to a result; accepted, buffered and unknown are steps
// on the way.
var vonageResults = map[string]herald.Status{
	"delivered": herald.StatusDelivered,
	"failed":    herald.StatusUndelivered,
	"rejected":  herald.StatusUndelivered,
	"expired":   herald.StatusUndelivered,
}

// vonage reads a delivery receipt (query parameters of a GET, a form or a JSON object of a
// POST), checks its sig and reads client-ref (the delivery id), status, err-code and
// message-timestamp.
func (x *Receiver) vonage(r *http.Request, body []byte) ([]delivery.Receipt, error) {
	params, err := vonageParams(r, body)
	if err != nil {
		return nil, errBadSignature // unreadable: no signature to check
	}
	if !VonageVerify(x.cfg.VonageSignatureSecret, params) {
		return nil, errBadSignature
	}
	id, status := params["client-ref"], params["status"]
	if id == "" || status == "" {
		return nil, errors.New("no client-ref or status")
	}
	at := time.Now().UTC()
	if t, err := time.Parse(time.DateTime, params["message-timestamp"]); err == nil {
		at = t
	}
	return []delivery.Receipt{{DeliveryID: id, Status: status, Code: params["err-code"],
		Result: vonageResults[status], At: at}}, nil
}

func vonageParams(r *http.Request, body []byte) (map[string]string, error) {
	out := map[string]string{}
	if r.Method == http.MethodPost && strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, err
		}
		for k, v := range m {
			if s, ok := v.(string); ok {
				out[k] = s
			}
		}
		return out, nil
	}
	vals := r.URL.Query()
	if r.Method == http.MethodPost {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, err
		}
		vals = form
	}
	for k, v := range vals {
		if len(v) != 1 {
			return nil, errors.New("repeated parameter " + k)
		}
		out[k] = v[0]
	}
	return out, nil
}

// VonageSign is Vonage's signature of params with the HMAC-SHA256 method: every parameter but
// sig, sorted by name, as "&name=value" with & and = in values replaced by _, HMAC-SHA256 with
// the signature secret, hex. The simulator signs with it; herald checks with VonageVerify.
func VonageSign(secret string, params map[string]string) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		if k != "sig" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	clean := strings.NewReplacer("&", "_", "=", "_")
	for _, k := range keys {
		b.WriteString("&" + k + "=" + clean.Replace(params[k]))
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(b.String()))
	return hex.EncodeToString(m.Sum(nil))
}

// VonageVerify reports whether params carry a sig that VonageSign gives, in constant time
// (hex in either case).
func VonageVerify(secret string, params map[string]string) bool {
	got, err := hex.DecodeString(params["sig"])
	if err != nil || len(got) == 0 {
		return false
	}
	want, _ := hex.DecodeString(VonageSign(secret, params))
	return hmac.Equal(got, want)
}
