package helm_test

import (
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart, relative to this package.
const chartDir = "herald"

// kubeVersion is the cluster version the chart is rendered for (its kubeVersion is >= 1.25).
const kubeVersion = "v1.31.0"

// valueSets are the value files of testdata/ the chart must render and validate with.
var valueSets = []string{"default", "ha", "minimal"}

// TestMain loads the chart once with the log on, so that Helm's note about the rules file's
// symbolic link shows once, not for every rendering.
func TestMain(m *testing.M) {
	if _, err := loader.Load(chartDir); err != nil {
		fmt.Fprintln(os.Stderr, "load chart:", err)
		os.Exit(1)
	}
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err, "load chart %s", chartDir)
	return ch
}

// values reads testdata/<name>.yaml.
func values(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".yaml"))
	require.NoError(t, err)
	v := map[string]any{}
	require.NoError(t, yaml.Unmarshal(b, &v), "testdata/%s.yaml", name)
	return v
}

// doc is one rendered object: the template it came from and its YAML.
type doc struct {
	source string
	yaml   string
	hook   bool
}

// install renders the chart like `helm install --dry-run` (client only: no cluster), hooks
// included, and returns its objects; the error is the install's (a failed template, a
// `required` or `fail`).
func install(t *testing.T, vals map[string]any) ([]doc, error) {
	t.Helper()
	cfg := &action.Configuration{Log: func(string, ...any) {}}
	inst := action.NewInstall(cfg)
	inst.ClientOnly = true
	inst.DryRun = true
	inst.ReleaseName = "herald"
	inst.Namespace = "notify"
	inst.Replace = true
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	require.NoError(t, err)
	inst.KubeVersion = kv
	rel, err := inst.Run(loadChart(t), vals)
	if err != nil {
		return nil, err
	}
	docs := splitDocs(rel.Manifest)
	for _, h := range rel.Hooks {
		docs = append(docs, doc{source: h.Path, yaml: h.Manifest, hook: true})
	}
	return docs, nil
}

// render is install that must succeed.
func render(t *testing.T, vals map[string]any) []doc {
	t.Helper()
	docs, err := install(t, vals)
	require.NoError(t, err)
	require.NotEmpty(t, docs)
	return docs
}

// splitDocs splits a release manifest into its objects, keeping the "# Source:" of each.
func splitDocs(manifest string) []doc {
	parts := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []doc
	for _, k := range keys {
		y := parts[k]
		src := ""
		if first, _, ok := strings.Cut(y, "\n"); ok && strings.HasPrefix(first, "# Source: ") {
			src = strings.TrimPrefix(first, "# Source: ")
		}
		if strings.TrimSpace(stripComments(y)) == "" {
			continue
		}
		out = append(out, doc{source: src, yaml: y})
	}
	return out
}

func stripComments(y string) string {
	var b strings.Builder
	for _, line := range strings.Split(y, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			fmt.Fprintln(&b, line)
		}
	}
	return b.String()
}

// with returns a copy of vals with the dotted path set to v.
func with(t *testing.T, vals map[string]any, path string, v any) map[string]any {
	t.Helper()
	out := deepCopy(vals)
	m := out
	keys := strings.Split(path, ".")
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = v
	return out
}

func deepCopy(m map[string]any) map[string]any {
	b, err := yaml.Marshal(m)
	if err != nil {
		panic(err)
	}
	out := map[string]any{}
	if err := yaml.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}
