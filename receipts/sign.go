package receipts

import (
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // Twilio's signature is HMAC-SHA1
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"sort"
)

// The providers' signatures, as the providers make them: the simulator signs its receipts
// with these, and the tests forge and sign with them. herald checks Twilio's with twilio-go,
// SendGrid's with sendgrid-go and Vonage's with VonageVerify.

// TwilioSign is X-Twilio-Signature for a POST of form to fullURL: base64(HMAC-SHA1(auth token,
// fullURL + every parameter sorted by name, name and value concatenated)).
func TwilioSign(authToken, fullURL string, form url.Values) string {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	m := hmac.New(sha1.New, []byte(authToken))
	m.Write([]byte(fullURL))
	for _, k := range keys {
		for _, v := range form[k] {
			m.Write([]byte(k + v))
		}
	}
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// SendGridSign is X-Twilio-Email-Event-Webhook-Signature for body sent at timestamp: ECDSA
// (P-256, SHA-256) of timestamp + body, ASN.1 DER, base64.
func SendGridSign(key *ecdsa.PrivateKey, timestamp string, body []byte) (string, error) {
	h := sha256.Sum256(append([]byte(timestamp), body...))
	sig, err := ecdsa.SignASN1(rand.Reader, key, h[:])
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}
