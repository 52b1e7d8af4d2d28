package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/redrive"
)

// --redrive-lot-size (HERALD_REDRIVE_LOT_SIZE) reaches the re-drive executor's config,
// redrive.DefaultLotSize by default, and a size the executor cannot take is refused with the
// flag's name.
func TestServeRedriveLotSizeFlag(t *testing.T) {
	parse := func(args ...string) (redrive.Config, error) {
		c, err := parseServe(t, args...)
		return c.Redrive, err
	}
	cfg, err := parse()
	require.NoError(t, err)
	require.Equal(t, redrive.DefaultLotSize, cfg.LotSize)
	cfg, err = parse("--redrive-lot-size", "2000")
	require.NoError(t, err)
	require.Equal(t, 2000, cfg.LotSize)
	t.Setenv("HERALD_REDRIVE_LOT_SIZE", "250")
	cfg, err = parse()
	require.NoError(t, err)
	require.Equal(t, 250, cfg.LotSize)
	for _, bad := range []string{"0", "-5", "10001"} {
		_, err = parse("--redrive-lot-size", bad)
		require.ErrorContains(t, err, "--redrive-lot-size "+bad, bad)
	}
}
