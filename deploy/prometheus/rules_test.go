// Package prometheus_test checks herald's Prometheus rules with promtool: the rules parse,
// and the unit tests of *_test.yml (alerts fire on the failures they are for, and only
// then) pass. promtool comes with Debian's prometheus package; `make test` installs it
// (deploy/local/stack.sh install prometheus). Without it the test fails: rules that were
// never checked must not pass as tested.
package prometheus_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool is needed: deploy/local/stack.sh install prometheus (Debian's prometheus package)")
	return path
}

func TestRulesCheck(t *testing.T) {
	rules, err := filepath.Glob("*.rules.yml")
	require.NoError(t, err)
	require.NotEmpty(t, rules)
	out, err := exec.Command(promtool(t), append([]string{"check", "rules"}, rules...)...).CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)
}

func TestRulesUnitTests(t *testing.T) {
	tests, err := filepath.Glob("*_test.yml")
	require.NoError(t, err)
	require.NotEmpty(t, tests)
	out, err := exec.Command(promtool(t), append([]string{"test", "rules"}, tests...)...).CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s", out)
}
