package dispatch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// TestMessageCarriesClientID: the sender learns which API client created the notification
// (the webhook sender signs with that client's secret).
func TestMessageCarriesClientID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := &MemorySender{}
	e.start(e.config(), nil, smsOnly(s))
	id := e.insert(fixture{})
	e.publish(id)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusSent}, id)
	calls := s.Calls()
	require.Len(t, calls, 1)
	require.NotEmpty(t, e.clientID)
	require.Equal(t, e.clientID, calls[0].Message.ClientID)
}
