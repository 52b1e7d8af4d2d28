package ingest

import (
	"encoding/json"
	"net/http"
)

// Problem codes: the stable, machine-readable `code` of every error answer. Clients branch
// on these, never on title or detail. Each is documented in docs/api.md.
const (
	codeUnauthorized         = "unauthorized"           // 401
	codeInsufficientScope    = "insufficient_scope"     // 403
	codeNotFound             = "not_found"              // 404
	codeMethodNotAllowed     = "method_not_allowed"     // 405
	codeBodyTooLarge         = "body_too_large"         // 413
	codeUnsupportedMediaType = "unsupported_media_type" // 415
	codeMalformedJSON        = "malformed_json"         // 400
	codeUnknownField         = "unknown_field"          // 400
	codeValidationFailed     = "validation_failed"      // 400
	codeInvalidTemplate      = "invalid_template"       // 400
	codeTemplateNotAllowed   = "template_not_allowed"   // 422
	codeUnknownTemplate      = "unknown_template"       // 422
	codeTemplateRenderFailed = "template_render_failed" // 422
	codeIdempotencyKeyReused = "idempotency_key_reused" // 422
	codeChannelUnavailable   = "channel_unavailable"    // 422
	codePriorityNotAccepted  = "priority_not_accepted"  // 422: a priority this process's API does not accept (Config.Priorities)
	codeRedriveUnbounded     = "redrive_unbounded"      // 422: a re-drive filter with no status and no time range
	codeRedriveTooLarge      = "redrive_too_large"      // 422: a re-drive matching more than --redrive-max
	codeExpiresAtRequired    = "expires_at_required"    // 422: a re-drive of EXPIRED without a new expiresAt
	codeStatusNotSupported   = "status_not_supported"   // 422: a re-drive of UNDELIVERED
	codeAudienceTooLarge     = "audience_too_large"     // 413
	codeCampaignConflict     = "campaign_conflict"      // 409
	codeNotReady             = "not_ready"              // 503
	codeOverloaded           = "overloaded"             // 503
	codeUnavailable          = "unavailable"            // 503: PostgreSQL unreachable (unavailable.go)
	codeBadSignature         = "bad_signature"          // 403: a provider receipt (/providers/…, package receipts) without a valid signature
	codeInternal             = "internal"               // 500
)

// problemTypeBase prefixes the code to form the RFC 9457 `type` URI.
const problemTypeBase = "urn:herald:problem:"

// problem is an RFC 9457 problem document with herald's extension members.
type problem struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail,omitempty"`
	Code   string       `json:"code"`
	Errors []fieldError `json:"errors,omitempty"`
}

// fieldError names one failing input. Field is the JSON path of the member
// ("channels[1]", "to.phone") or the header name ("Idempotency-Key").
type fieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// apiError is an error that knows its HTTP answer. Handlers return it; writeError renders it.
type apiError struct {
	status int
	code   string
	title  string
	detail string
	fields []fieldError
	// retryAfter is the Retry-After header of the answer, in seconds; empty for none.
	retryAfter string
}

func (e *apiError) Error() string {
	if e.detail != "" {
		return e.code + ": " + e.detail
	}
	return e.code
}

func newAPIError(status int, code, detail string) *apiError {
	return &apiError{status: status, code: code, title: http.StatusText(status), detail: detail}
}

// invalid is a 400 validation_failed error listing the failing fields.
func invalid(fields ...fieldError) *apiError {
	return &apiError{
		status: http.StatusBadRequest,
		code:   codeValidationFailed,
		title:  "Validation failed",
		detail: "one or more fields are invalid",
		fields: fields,
	}
}

func writeProblem(w http.ResponseWriter, e *apiError) {
	p := problem{
		Type:   problemTypeBase + e.code,
		Title:  e.title,
		Status: e.status,
		Detail: e.detail,
		Code:   e.code,
		Errors: e.fields,
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	if e.retryAfter != "" {
		w.Header().Set("Retry-After", e.retryAfter)
	}
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, newAPIError(http.StatusInternalServerError, codeInternal, ""))
		return
	}
	writeJSONBytes(w, status, b)
}

func writeJSONBytes(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	_, _ = w.Write([]byte("\n"))
}
