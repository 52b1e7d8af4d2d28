package helm_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// kinds are the objects the chart may render, each with the Go type its API publishes.
var kinds = map[string]func() any{
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"batch/v1/Job":                            func() any { return &batchv1.Job{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return &monitoringv1.PrometheusRule{} },
	"keda.sh/v1alpha1/ScaledObject":           func() any { return &kedav1alpha1.ScaledObject{} },
}

// objects is one rendering, decoded: every object by kind and name.
type objects struct {
	byKind map[string]map[string]any
	hooks  map[string]bool // kind/name of the hooks
	all    int
}

// decode decodes every rendered object strictly into its type: a field the type does not
// have (a typo, a wrong indentation, a field of another API version) fails, and so does a
// kind the chart is not known to render.
func decode(t *testing.T, docs []doc) objects {
	t.Helper()
	o, err := decodeDocs(docs)
	require.NoError(t, err)
	return o
}

// decodeDocs is decode returning its error.
func decodeDocs(docs []doc) (objects, error) {
	o := objects{byKind: map[string]map[string]any{}, hooks: map[string]bool{}}
	for _, d := range docs {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(d.yaml), &tm); err != nil {
			return o, fmt.Errorf("%s: %w", d.source, err)
		}
		key := tm.APIVersion + "/" + tm.Kind
		newObj, ok := kinds[key]
		if !ok {
			return o, fmt.Errorf("%s renders %s, which the tests do not know", d.source, key)
		}
		obj := newObj()
		if err := unmarshalStrict([]byte(d.yaml), obj); err != nil {
			return o, fmt.Errorf("%s (%s): %w\n%s", d.source, key, err, d.yaml)
		}
		name := obj.(metav1.Object).GetName()
		if name == "" {
			return o, fmt.Errorf("%s: %s without a name", d.source, key)
		}
		if o.byKind[tm.Kind] == nil {
			o.byKind[tm.Kind] = map[string]any{}
		}
		if _, dup := o.byKind[tm.Kind][name]; dup {
			return o, fmt.Errorf("two %s named %s", tm.Kind, name)
		}
		o.byKind[tm.Kind][name] = obj
		if d.hook {
			o.hooks[tm.Kind+"/"+name] = true
		}
		o.all++
	}
	return o, nil
}

// unmarshalStrict decodes YAML as the API server's strict field validation does: a duplicate
// key, a field the type does not have, or a field spelled in another case
// (readOnlyRootFileSystem) is an error. encoding/json, under sigs.k8s.io/yaml's UnmarshalStrict,
// matches field names case-insensitively, and would let the last pass.
func unmarshalStrict(y []byte, obj any) error {
	j, err := yaml.YAMLToJSONStrict(y)
	if err != nil {
		return err
	}
	strict, err := k8sjson.UnmarshalStrict(j, obj)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

func get[T any](t *testing.T, o objects, kind, name string) T {
	t.Helper()
	obj, ok := o.byKind[kind][name]
	require.True(t, ok, "no %s named %s; the %ss are %v", kind, name, kind, names(o, kind))
	return obj.(T)
}

func names(o objects, kind string) []string {
	var out []string
	for n := range o.byKind[kind] {
		out = append(out, n)
	}
	return out
}

// TestDecodeStrictlyCatchesUnknownFields: a field the API types do not have, put into the
// chart's output through values the templates copy verbatim, fails the decoding the chart
// tests rely on — in Deployments, in the migrations Job (a hook) and in a NetworkPolicy —
// while the same value set without it decodes.
func TestDecodeStrictlyCatchesUnknownFields(t *testing.T) {
	base := values(t, "ha")
	_, err := decodeDocs(render(t, base))
	require.NoError(t, err)
	for _, c := range []struct {
		path  string
		v     any
		field string
	}{
		{"ingest.resources.request", map[string]any{"cpu": "1"}, "request"},
		{"events.resources.request", map[string]any{"cpu": "1"}, "request"},
		{"migrations.resources.limit", map[string]any{"cpu": "1"}, "limit"},
		{"securityContext.readOnlyRootFileSystem", true, "readOnlyRootFileSystem"},
		{"networkPolicy.egress", []any{map[string]any{"port": []any{map[string]any{"port": 443}}}}, "port"},
	} {
		_, err := decodeDocs(render(t, with(t, base, c.path, c.v)))
		require.Error(t, err, "%s: the wrong field %s decoded", c.path, c.field)
		require.Contains(t, err.Error(), `unknown field "`, c.path)
		require.Contains(t, err.Error(), c.field, c.path)
	}
}

// kedaKafkaMetadata returns the trigger metadata keys KEDA's Kafka scaler reads, from the
// scaler's source in the KEDA module the tests build against (go.mod): the fields of its
// metadata struct whose keda tag has triggerMetadata in its order.
func kedaKafkaMetadata(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kedacore/keda/v2").Output()
	require.NoError(t, err, "go list -m github.com/kedacore/keda/v2")
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "pkg", "scalers", "kafka_scaler.go"))
	require.NoError(t, err)
	keys := map[string]bool{}
	for _, m := range kedaTag.FindAllStringSubmatch(string(src), -1) {
		if slices.Contains(strings.Split(m[2], ";"), "triggerMetadata") {
			keys[m[1]] = true
		}
	}
	// What KEDA documents for the kafka trigger; the source must have them all, or the
	// parsing above went wrong.
	for _, k := range []string{"bootstrapServers", "consumerGroup", "topic", "lagThreshold",
		"activationLagThreshold", "offsetResetPolicy", "allowIdleConsumers", "scaleToZeroOnInvalidOffset",
		"excludePersistentLag", "limitToPartitionsWithLag", "partitionLimitation", "sasl", "tls",
		"unsafeSsl", "version"} {
		require.True(t, keys[k], "KEDA's kafka scaler source has no trigger metadata %q: %v", k, keys)
	}
	return keys
}

var kedaTag = regexp.MustCompile(`keda:"name=([A-Za-z0-9]+),order=([A-Za-z;]+)`)

// The ScaledObject's trigger metadata is a plain map, which strict decoding cannot check:
// every key of every Kafka trigger must be one KEDA's Kafka scaler reads, the chart's own and
// those of dispatch.autoscaling.keda.triggerMetadata alike.
func TestKEDATriggerMetadataKeysAreKEDAs(t *testing.T) {
	known := kedaKafkaMetadata(t)
	// unknown renders vals and returns the trigger metadata keys KEDA does not read.
	unknown := func(name string, vals map[string]any) []string {
		so := get[*kedav1alpha1.ScaledObject](t, decode(t, render(t, vals)), "ScaledObject", "herald-dispatch")
		require.NotEmpty(t, so.Spec.Triggers, name)
		var out []string
		for _, tr := range so.Spec.Triggers {
			require.Equal(t, "kafka", tr.Type, name)
			for k := range tr.Metadata {
				if !known[k] {
					out = append(out, tr.Name+": "+k)
				}
			}
		}
		return out
	}
	ha := values(t, "ha")
	for name, vals := range map[string]map[string]any{
		"ha":                    ha,
		"ha, HIGH in dispatch":  with(t, ha, "dispatchHigh.enabled", false),
		"default, KEDA enabled": with(t, values(t, "default"), "dispatch.autoscaling.keda.enabled", true),
	} {
		require.Empty(t, unknown(name, vals), "%s: trigger metadata KEDA's Kafka scaler does not read", name)
	}
	// A key KEDA does not read is caught.
	typo := with(t, ha, "dispatch.autoscaling.keda.triggerMetadata", map[string]any{"saslMechanism": "scram_sha512"})
	require.Equal(t, []string{"lag-normal: saslMechanism", "lag-low: saslMechanism"}, unknown("typo", typo))
}
