package benchproc

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStartReadsTheChildAndStopsIt(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	var p *Proc
	t.Run("running", func(t *testing.T) {
		p = Start(t, sleep, "60")
		require.True(t, p.Alive())
		rss, err := p.StatusKB("VmRSS")
		require.NoError(t, err)
		require.Positive(t, rss)
		hwm, err := p.StatusKB("VmHWM")
		require.NoError(t, err)
		require.GreaterOrEqual(t, hwm, rss)
		_, err = p.StatusKB("NoSuchField")
		require.ErrorContains(t, err, "no NoSuchField")
		cpu, err := p.CPU()
		require.NoError(t, err)
		require.Less(t, cpu, 10*time.Second)
	})
	// The subtest's cleanup stopped the child (SIGTERM) well before its 60 s.
	require.False(t, p.Alive())
}
