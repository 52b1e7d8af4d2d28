package console

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/heraldhq/herald/internal/apikey"
)

// sessionCookie is the console's session: the API client whose operator key logged in.
// securecookie signs it (HMAC-SHA256) and stamps it; a stamp older than SessionTTL is
// refused. The key itself is never stored anywhere.
const sessionCookie = "herald_console"

type session struct {
	ClientID string `json:"c"`
}

func (c *Console) setSession(w http.ResponseWriter, r *http.Request, s session) error {
	v, err := c.cookie.Encode(sessionCookie, s)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: v, Path: "/console", MaxAge: int(c.cfg.SessionTTL.Seconds()),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	return nil
}

func clearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/console", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// operator runs next for a request with a valid session whose client still holds the
// operator scope. No session, an expired or forged one, or a revoked client: a redirect to
// the login page. A client that lost the operator scope: 403.
func (c *Console) operator(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s session
		ck, err := r.Cookie(sessionCookie)
		if err == nil {
			err = c.cookie.Decode(sessionCookie, ck.Value, &s)
		}
		if err != nil {
			toLogin(w, r)
			return
		}
		scopes, err := apikey.ClientScopes(r.Context(), c.pool, s.ClientID)
		if errors.Is(err, apikey.ErrUnauthorized) {
			clearSession(w, r)
			toLogin(w, r)
			return
		}
		if err != nil {
			c.fail(w, http.StatusInternalServerError, "the database did not answer", err)
			return
		}
		if !apikey.HasScope(scopes, apikey.ScopeOperator) {
			c.fail(w, http.StatusForbidden, "this API key lacks the operator scope", nil)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), clientKey{}, s.ClientID)))
	})
}

type clientKey struct{}

// clientOf is the API client of the operator whose session the request carries (operator
// put it in the context).
func clientOf(ctx context.Context) string {
	id, _ := ctx.Value(clientKey{}).(string)
	return id
}

func toLogin(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/console/login?next="+strings.TrimPrefix(r.URL.RequestURI(), "/console"), http.StatusSeeOther)
}

// nextPage is where to go after the login: a console path, never another site.
func nextPage(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/console/"
	}
	return "/console" + next
}

type loginData struct {
	Next, Error string
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, "login", page{Title: "Log in", Data: loginData{Next: r.URL.Query().Get("next")}})
}

// login checks the posted API key: unknown or revoked is 401, without the operator scope
// 403; otherwise the session cookie is set and the operator goes on to the page asked for.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		c.render(w, http.StatusBadRequest, "login", page{Title: "Log in", Data: loginData{Error: "the form could not be read"}})
		return
	}
	next := r.PostForm.Get("next")
	client, scopes, err := apikey.Authenticate(r.Context(), c.pool, strings.TrimSpace(r.PostForm.Get("key")))
	switch {
	case errors.Is(err, apikey.ErrUnauthorized):
		c.render(w, http.StatusUnauthorized, "login", page{Title: "Log in", Data: loginData{Next: next, Error: "unknown or revoked API key"}})
		return
	case err != nil:
		c.fail(w, http.StatusInternalServerError, "the database did not answer", err)
		return
	case !apikey.HasScope(scopes, apikey.ScopeOperator):
		c.render(w, http.StatusForbidden, "login", page{Title: "Log in", Data: loginData{Next: next, Error: "this API key lacks the operator scope"}})
		return
	}
	if err := c.setSession(w, r, session{ClientID: client}); err != nil {
		c.fail(w, http.StatusInternalServerError, "the session could not be created", err)
		return
	}
	c.log.Info("operator logged in", zap.String("client_id", client))
	http.Redirect(w, r, nextPage(next), http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	clearSession(w, r)
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}
