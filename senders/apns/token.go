package apns

import (
	"crypto/ecdsa"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// providerToken caches the ES256 provider token: one signature per TokenTTL, not per send.
type providerToken struct {
	key    *ecdsa.PrivateKey
	keyID  string
	teamID string
	ttl    time.Duration
	now    func() time.Time

	mu       sync.Mutex
	token    string
	issuedAt time.Time
}

// get returns the current token, signing a new one when the old one is older than ttl.
func (p *providerToken) get() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if p.token != "" && now.Sub(p.issuedAt) < p.ttl {
		return p.token, nil
	}
	t := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": p.teamID, "iat": now.Unix()})
	t.Header["kid"] = p.keyID
	signed, err := t.SignedString(p.key)
	if err != nil {
		return "", err
	}
	p.token, p.issuedAt = signed, now
	return signed, nil
}

// invalidate drops token if it is still the current one, so the next send signs afresh
// (after APNs answered ExpiredProviderToken or InvalidProviderToken).
func (p *providerToken) invalidate(token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.token == token {
		p.token = ""
	}
}
