package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/heraldhq/herald/internal/endpoint"
	"github.com/heraldhq/herald/senders"
	"github.com/heraldhq/herald/senders/webhook"
)

// ContentType is the content type of every POST: a CloudEvents structured-mode event.
const ContentType = "application/cloudevents+json"

const userAgent = "herald-events/1"

// Secrets looks up the signing secrets of an API client (apikey.WebhookSecrets).
type Secrets interface {
	WebhookSecrets(ctx context.Context, clientID string) ([]string, error)
}

// answer is what one POST came back with.
type answer struct {
	status     int           // 0: no response
	retryAfter time.Duration // the endpoint's Retry-After
	err        error         // no response, or no request could be made; its text holds no URL
	permanent  bool          // err is final (bad URL, blocked address, no secret)
	took       time.Duration
}

// post sends m's body to its endpoint, signed with the secrets of its client, webhook-id =
// the event id (the same on every attempt).
func (r *Role) post(ctx context.Context, m endpoint.Message) answer {
	start := time.Now()
	a := r.postOnce(ctx, m)
	a.took = time.Since(start)
	return a
}

func (r *Role) postOnce(ctx context.Context, m endpoint.Message) answer {
	u, err := url.Parse(m.URL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(r.cfg.AllowHTTP && u.Scheme == "http")) {
		return answer{err: errors.New("endpoint url is not an allowed absolute https url"), permanent: true}
	}
	secrets, err := r.secrets.WebhookSecrets(ctx, m.ClientID)
	if err != nil {
		return answer{err: fmt.Errorf("signing secrets of client %s: %w", m.ClientID, err)}
	}
	now := time.Now()
	sig, err := webhook.Sign(secrets, m.EventID, now, m.Body)
	if err != nil {
		return answer{err: fmt.Errorf("client %s has no usable signing secret", m.ClientID), permanent: true}
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(m.Body))
	if err != nil {
		return answer{err: errors.New("build request failed"), permanent: true}
	}
	req.Header.Set("Content-Type", ContentType)
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(webhook.HeaderWebhookID, m.EventID)
	req.Header.Set(webhook.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(webhook.HeaderWebhookSignature, sig)
	resp, err := senders.DoHTTP(r.client, req)
	if err != nil {
		return answer{err: err, permanent: webhook.IsBlockedAddress(err)}
	}
	senders.ReadBody(resp)
	return answer{status: resp.StatusCode, retryAfter: senders.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())}
}

// verdict is what follows an answer: which transition, and when a retry is due.
func (r *Role) verdict(m endpoint.Message, a answer) (endpoint.Result, time.Time) {
	switch {
	case a.err == nil && a.status >= 200 && a.status < 300:
		return endpoint.ResultDelivered, time.Time{}
	case a.err == nil && a.status == http.StatusGone:
		return endpoint.ResultGone, time.Time{}
	case a.permanent:
		return endpoint.ResultDropped, time.Time{}
	case a.err == nil && a.status != http.StatusTooManyRequests && a.status < 500:
		return endpoint.ResultDropped, time.Time{} // another 4xx (or an unfollowed 3xx): final
	}
	next := m.Try() + 1
	if next >= len(r.cfg.RetrySchedule) {
		return endpoint.ResultDropped, time.Time{}
	}
	delay := max(r.cfg.RetrySchedule[next], min(a.retryAfter, maxRetryAfter))
	return endpoint.ResultRetry, time.Now().Add(delay)
}

// maxRetryAfter caps an endpoint's Retry-After at the longest step of the Standard Webhooks
// schedule.
const maxRetryAfter = 24 * time.Hour

// describe is the attempt log's error text of an answer: never the URL.
func describe(a answer) string {
	if a.err != nil {
		return a.err.Error()
	}
	if a.status < 200 || a.status >= 300 {
		return "http status " + strconv.Itoa(a.status)
	}
	return ""
}
