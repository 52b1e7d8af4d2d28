package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald"
)

// TestSwappedBombTemplateFailsTheDelivery: a delivery accepted with a harmless template whose
// content was then replaced, behind the API's back, by the bomb of the security review ends
// FAILED at once; the worker is not held and the provider is never called.
func TestSwappedBombTemplateFailsTheDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := &MemorySender{ProviderName: "sms:test"}
	e.start(e.config(), nil, smsOnly(s))
	_, err := e.pool.Exec(context.Background(), `INSERT INTO template (name, category, channels, content)
		VALUES ('otp', 'security', '{SMS}', '{"SMS":{"default":{"text":"Code {{.code}}"}}}')`)
	require.NoError(t, err)
	id := e.insert(fixture{})
	_, err = e.pool.Exec(context.Background(), `UPDATE template SET content = jsonb_build_object('SMS',
		jsonb_build_object('default', jsonb_build_object('text', $1::text))) WHERE name = 'otp'`,
		`{{range 9000000000000000000}}{{printf "%0900000d" 0}}{{end}}`)
	require.NoError(t, err)
	e.publish(id)
	e.waitStatus(30*time.Second, []herald.Status{herald.StatusFailed}, id)
	require.Empty(t, s.Calls())
}
