package senders

import "net/url"

// IsHTTPURL reports whether s is an absolute http or https URL with a host: what a provider
// base URL or a receipt callback URL must be.
func IsHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
