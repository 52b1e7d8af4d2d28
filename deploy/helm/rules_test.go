package helm_test

import (
	"os"
	"path/filepath"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The Prometheus rules have one source, deploy/prometheus/herald.rules.yml: promtool checks
// and tests it (deploy/prometheus/rules_test.go), the local Prometheus loads it, and the
// chart's files/herald.rules.yml links to it.
const (
	rulesFile    = "../prometheus/herald.rules.yml"
	promtoolTest = "../prometheus/herald_test.yml"
	chartRules   = "herald/files/herald.rules.yml"
)

// TestPrometheusRuleIsTheFilePromtoolTests: the PrometheusRule's groups are the groups of
// the rules file that promtool's unit tests load, rule for rule.
func TestPrometheusRuleIsTheFilePromtoolTests(t *testing.T) {
	// The file the promtool tests load.
	var unit struct {
		RuleFiles []string `json:"rule_files"`
	}
	b, err := os.ReadFile(promtoolTest)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &unit))
	require.Contains(t, unit.RuleFiles, filepath.Base(rulesFile), "%s tests %s", promtoolTest, rulesFile)

	// The chart's file is that file.
	linked, err := filepath.EvalSymlinks(chartRules)
	require.NoError(t, err)
	want, err := filepath.Abs(rulesFile)
	require.NoError(t, err)
	got, err := filepath.Abs(linked)
	require.NoError(t, err)
	require.Equal(t, want, got, "%s must link to %s", chartRules, rulesFile)

	b, err = os.ReadFile(rulesFile)
	require.NoError(t, err)
	var spec monitoringv1.PrometheusRuleSpec
	require.NoError(t, yaml.UnmarshalStrict(b, &spec), "%s as a PrometheusRule spec", rulesFile)
	require.NotEmpty(t, spec.Groups)

	o := decode(t, render(t, values(t, "ha")))
	pr := get[*monitoringv1.PrometheusRule](t, o, "PrometheusRule", "herald")
	require.Equal(t, spec.Groups, pr.Spec.Groups)
	require.Equal(t, "kube-prometheus-stack", pr.Labels["release"])
	var rules int
	for _, g := range pr.Spec.Groups {
		rules += len(g.Rules)
	}
	t.Logf("PrometheusRule: %d groups, %d rules", len(pr.Spec.Groups), rules)

	require.Empty(t, decode(t, render(t, values(t, "default"))).byKind["PrometheusRule"], "off by default")
}

// The ServiceMonitor scrapes the admin port of every role's Service.
func TestServiceMonitorScrapesEveryRole(t *testing.T) {
	o := decode(t, render(t, values(t, "ha")))
	sm := get[*monitoringv1.ServiceMonitor](t, o, "ServiceMonitor", "herald")
	require.Len(t, sm.Spec.Endpoints, 1)
	require.Equal(t, "admin", sm.Spec.Endpoints[0].Port)
	require.Equal(t, "/metrics", sm.Spec.Endpoints[0].Path)
	for _, role := range heraldRoles(t) {
		svc := o.byKind["Service"]["herald-"+role]
		require.NotNil(t, svc, role)
		s := svc.(interface{ GetLabels() map[string]string }).GetLabels()
		for k, v := range sm.Spec.Selector.MatchLabels {
			require.Equal(t, v, s[k], "%s: label %s", role, k)
		}
		require.Contains(t, sm.Spec.Selector.MatchExpressions[0].Values, s["app.kubernetes.io/component"])
	}
}
