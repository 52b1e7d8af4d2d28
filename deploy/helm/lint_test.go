package helm_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// TestLint is `helm lint` (the Helm SDK's linter) with each value set: no warning, no error.
func TestLint(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	require.NoError(t, err)
	for _, set := range valueSets {
		t.Run(set, func(t *testing.T) {
			l := lint.AllWithKubeVersion(chartDir, values(t, set), "notify", kv)
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m.Error())
				} else {
					t.Logf("helm lint: %s", m.Error())
				}
			}
		})
	}
}
