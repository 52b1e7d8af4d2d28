package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/client"
	"github.com/heraldhq/herald/internal/heraldtest"
)

// TestGeneratedClient sends an OTP with the client generated from docs/openapi.yaml through
// a real herald serve (ingest, relay, Kafka, dispatch, the simulated Twilio) and reads its
// status with the same client until it is SENT; the typed answers of a refusal and of an
// unknown id come back as the description's problems. Its exchanges go through httpClient,
// so they are checked against the description as well.
func TestGeneratedClient(t *testing.T) {
	t.Parallel()
	e := newE2E(t, 1)
	c, err := client.NewClientWithResponses("http://"+e.addr, client.WithHTTPClient(httpClient),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+e.key)
			return nil
		}))
	require.NoError(t, err)
	ctx := t.Context()

	high := client.HIGH
	payload := client.Payload{"code": "271828"}
	res, err := c.PostNotificationWithResponse(ctx, &client.PostNotificationParams{IdempotencyKey: "generated-client-1"},
		client.NotificationRequest{UserId: 1, Template: "otp", Channels: client.Channels{client.SMS}, Priority: &high, Payload: &payload})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, res.StatusCode(), "%s", res.Body)
	require.NotNil(t, res.JSON202)
	id := res.JSON202.Id.String()
	require.Equal(t, "/api/notifications/"+id, res.HTTPResponse.Header.Get("Location"))
	require.Len(t, res.JSON202.Deliveries, 1)
	require.Equal(t, client.SMS, res.JSON202.Deliveries[0].Channel)
	require.Equal(t, client.DeliveryStatusPENDING, res.JSON202.Deliveries[0].Status)

	var got *client.Notification
	heraldtest.WaitFor(t, 60*time.Second, "the OTP to be SENT", func() bool {
		tp := client.Traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		r, err := c.GetNotificationWithResponse(ctx, id, &client.GetNotificationParams{Traceparent: &tp})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.StatusCode(), "%s", r.Body)
		got = r.JSON200
		return got.Deliveries[0].Status == client.DeliveryStatusSENT
	})
	require.Equal(t, int64(1), got.UserId)
	require.Equal(t, client.HIGH, got.Priority)
	d := got.Deliveries[0]
	require.Nil(t, d.NextAttemptAt, "a final delivery has no next attempt")
	require.NotNil(t, d.SentAt)
	require.NotNil(t, d.Provider)
	require.Len(t, d.AttemptLog, d.Attempts)
	require.Equal(t, client.AttemptOutcomeSENT, d.AttemptLog[len(d.AttemptLog)-1].Outcome)

	// The same key with another body: the typed 422.
	res, err = c.PostNotificationWithResponse(ctx, &client.PostNotificationParams{IdempotencyKey: "generated-client-1"},
		client.NotificationRequest{UserId: 1, Template: "otp", Channels: client.Channels{client.EMAIL}, Payload: &payload})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, res.StatusCode(), "%s", res.Body)
	require.NotNil(t, res.ApplicationproblemJSON422)
	require.EqualValues(t, "idempotency_key_reused", res.ApplicationproblemJSON422.Code)

	missing, err := c.GetNotificationWithResponse(ctx, "01a229cf-44c9-7dc8-910f-23f85bba1e50", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, missing.StatusCode())
	require.NotNil(t, missing.ApplicationproblemJSON404)
	require.Equal(t, client.NotFoundCodeNotFound, missing.ApplicationproblemJSON404.Code)
}
