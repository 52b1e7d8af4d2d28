package ingest

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/heraldhq/herald/internal/apikey"
)

// principal is who a request comes from: its API client and that key's scopes.
type principal struct {
	clientID string
	scopes   []apikey.Scope
}

type clientIDKey struct{}

// clientFrom returns the authenticated client id that authenticate put in the context.
func clientFrom(ctx context.Context) string {
	id, _ := ctx.Value(clientIDKey{}).(string)
	return id
}

// authorize resolves "Authorization: Bearer <key>" to an API client and its scopes, answers
// 401 when the key is missing, unknown or revoked and 403 insufficient_scope when the key
// holds none of anyOf (apikey.ScopeOperator holds every scope). Either way next does not run, so
// nothing is read or written. The lookup is one index probe on the key's hash, cached for
// Config.AuthCacheTTL.
func (a *API) authorize(next http.Handler, anyOf ...apikey.Scope) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := apikey.BearerKey(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="herald"`)
			writeProblem(w, newAPIError(http.StatusUnauthorized, codeUnauthorized, "a valid API key is required: Authorization: Bearer <key>"))
			return
		}
		h := sha256.Sum256([]byte(key))
		p, ok := a.keys.get(h, time.Now())
		if !ok {
			var err error
			p.clientID, p.scopes, err = apikey.LookupHash(r.Context(), a.pool, h)
			if errors.Is(err, apikey.ErrUnauthorized) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="herald", error="invalid_token"`)
				writeProblem(w, newAPIError(http.StatusUnauthorized, codeUnauthorized, "the API key is unknown or revoked"))
				return
			}
			if err != nil {
				a.internalError(w, r, err)
				return
			}
			a.keys.put(h, p, time.Now())
		}
		for _, s := range anyOf {
			if apikey.HasScope(p.scopes, s) {
				next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientIDKey{}, p.clientID)))
				return
			}
		}
		need := apikey.JoinScopes(anyOf)
		w.Header().Set("WWW-Authenticate", `Bearer realm="herald", error="insufficient_scope", scope="`+strings.ReplaceAll(need, ",", " ")+`"`)
		writeProblem(w, newAPIError(http.StatusForbidden, codeInsufficientScope,
			"this API key lacks the scope this route needs: "+strings.ReplaceAll(need, ",", " or ")))
	})
}
