package apikey

import (
	"fmt"
	"slices"
	"strings"
)

// Scope is one capability of an API key. Every API route needs one (see routeScopes in
// ingest/api.go and docs/security.md); a key without it gets 403 insufficient_scope.
type Scope string

// The scopes. ScopeOperator implies every other scope: it is the key of the people who run
// herald (make run's dev key, keys that existed before scopes), not of a client service.
const (
	ScopeNotificationsSend Scope = "notifications:send"
	ScopeNotificationsRead Scope = "notifications:read"
	ScopeUsersRead         Scope = "users:read"
	ScopeUsersWrite        Scope = "users:write"
	ScopeTemplatesWrite    Scope = "templates:write"
	ScopeCampaignsWrite    Scope = "campaigns:write"
	ScopeWebhooksWrite     Scope = "webhooks:write"
	ScopeOperator          Scope = "operator"
)

// AllScopes lists every scope, in the order listings show them.
func AllScopes() []Scope {
	return []Scope{ScopeNotificationsSend, ScopeNotificationsRead, ScopeUsersRead, ScopeUsersWrite,
		ScopeTemplatesWrite, ScopeCampaignsWrite, ScopeWebhooksWrite, ScopeOperator}
}

// DefaultScopes are the scopes of a key created without --scopes: a service that sends
// notifications and reads their status.
func DefaultScopes() []Scope {
	return []Scope{ScopeNotificationsSend, ScopeNotificationsRead}
}

// ErrUnknownScope is returned by ParseScopes for a name that is no scope.
var ErrUnknownScope = fmt.Errorf("unknown scope (known: %s)", JoinScopes(AllScopes()))

// ParseScopes reads a comma-separated list of scopes ("notifications:send,users:read").
// Spaces around names are ignored, duplicates collapse, and the result is in AllScopes
// order. An empty list or an unknown name is an error.
func ParseScopes(s string) ([]Scope, error) {
	seen := map[Scope]bool{}
	for _, part := range strings.Split(s, ",") {
		name := Scope(strings.TrimSpace(part))
		if name == "" {
			continue
		}
		if !slices.Contains(AllScopes(), name) {
			return nil, fmt.Errorf("scope %q: %w", string(name), ErrUnknownScope)
		}
		seen[name] = true
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("no scope given (known: %s)", JoinScopes(AllScopes()))
	}
	var out []Scope
	for _, sc := range AllScopes() {
		if seen[sc] {
			out = append(out, sc)
		}
	}
	return out, nil
}

func JoinScopes(scopes []Scope) string {
	s := make([]string, len(scopes))
	for i, sc := range scopes {
		s[i] = string(sc)
	}
	return strings.Join(s, ",")
}
