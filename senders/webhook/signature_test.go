package webhook

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

const (
	secretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secretB = "whsec_c2VjcmV0LW9mLWNsaWVudC1iLTI0LWJ5dGVzIQ=="
)

func headers(id string, t time.Time, sig string) http.Header {
	h := http.Header{}
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(t.Unix(), 10))
	h.Set(HeaderWebhookSignature, sig)
	return h
}

// TestSignMatchesReference: Sign produces what the specification's reference library
// produces, and Verify agrees with it.
func TestSignMatchesReference(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"a":1}`)
	sig, err := Sign([]string{secretA}, "msg_1", now, body)
	require.NoError(t, err)
	ref, err := standardwebhooks.NewWebhook(secretA)
	require.NoError(t, err)
	want, err := ref.Sign("msg_1", now, body)
	require.NoError(t, err)
	require.Equal(t, want, sig)
	require.Regexp(t, `^v1,[A-Za-z0-9+/]{43}=$`, sig)

	h := headers("msg_1", now, sig)
	require.NoError(t, Verify(secretA, h, body, now.Add(time.Minute), 5*time.Minute))
	require.NoError(t, ref.VerifyIgnoringTimestamp(body, h))
	require.ErrorIs(t, Verify(secretB, h, body, now, time.Minute), ErrBadSignature)
	require.ErrorIs(t, Verify(secretA, h, []byte(`{"a":2}`), now, time.Minute), ErrBadSignature)
	require.ErrorIs(t, Verify(secretA, headers("msg_2", now, sig), body, now, time.Minute), ErrBadSignature, "the id is signed")
	require.ErrorIs(t, Verify(secretA, headers("msg_1", now.Add(time.Second), sig), body, now, time.Minute), ErrBadSignature, "the timestamp is signed")
	require.ErrorIs(t, Verify(secretA, h, body, now.Add(time.Hour), time.Minute), ErrStale)
	require.ErrorIs(t, Verify(secretA, h, body, now.Add(-time.Hour), time.Minute), ErrStale)
	require.ErrorIs(t, Verify("not-base64!", h, body, now, time.Minute), ErrBadSecret)

	// Two secrets (a rotation): two signatures, each verifies with its own secret.
	both, err := Sign([]string{secretB, secretA}, "msg_1", now, body)
	require.NoError(t, err)
	require.Regexp(t, `^v1,\S+ v1,\S+$`, both)
	for _, s := range []string{secretA, secretB} {
		require.NoError(t, Verify(s, headers("msg_1", now, both), body, now, time.Minute))
	}
	_, err = Sign(nil, "msg_1", now, body)
	require.ErrorIs(t, err, ErrBadSecret)
	_, err = Sign([]string{"whsec_"}, "msg_1", now, body)
	require.ErrorIs(t, err, ErrBadSecret)
}

// FuzzVerify: Verify never panics; it accepts what Sign made and nothing once the body
// changes; and it is never more lenient than the specification's reference library.
func FuzzVerify(f *testing.F) {
	now := time.Unix(1_700_000_000, 0)
	good, _ := Sign([]string{secretA}, "msg_1", now, []byte(`{"a":1}`))
	f.Add("msg_1", int64(1_700_000_000), []byte(`{"a":1}`), good)
	f.Add("msg_1", int64(1_700_000_000), []byte(`{"a":1}`), "v1,"+good[3:]+" v1,x")
	f.Add("msg_1", int64(1_700_000_000), []byte(`{"a":1}`), "v2,"+good[3:])
	f.Add("msg_1", int64(1_700_000_000), []byte(`{"a":1}`), good+",trailing")
	f.Add("", int64(0), []byte{}, "")
	f.Add("a.b", int64(-1), []byte("."), "v1,")
	f.Fuzz(func(t *testing.T, id string, ts int64, body []byte, header string) {
		at := time.Unix(ts, 0)
		h := headers(id, at, header)
		err := Verify(secretA, h, body, at, time.Minute)
		if err == nil {
			ref, rerr := standardwebhooks.NewWebhook(secretA)
			require.NoError(t, rerr)
			require.NoError(t, ref.VerifyIgnoringTimestamp(body, h), "accepted what the reference refuses")
		}

		sig, err := Sign([]string{secretA}, id, at, body)
		require.NoError(t, err)
		if id == "" || http.Header(h).Get(HeaderWebhookID) != id {
			return // headers cannot carry this id (empty, or not a valid header value)
		}
		signed := headers(id, at, sig)
		require.NoError(t, Verify(secretA, signed, body, at, time.Minute))
		require.ErrorIs(t, Verify(secretA, signed, append(body[:len(body):len(body)], 'x'), at, time.Minute), ErrBadSignature)
		require.ErrorIs(t, Verify(secretB, signed, body, at, time.Minute), ErrBadSignature)
	})
}
