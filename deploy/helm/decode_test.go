package helm_test

import (
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
	o := objects{byKind: map[string]map[string]any{}, hooks: map[string]bool{}}
	for _, d := range docs {
		var tm metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal([]byte(d.yaml), &tm), "%s", d.source)
		key := tm.APIVersion + "/" + tm.Kind
		newObj, ok := kinds[key]
		require.True(t, ok, "%s renders %s, which the tests do not know", d.source, key)
		obj := newObj()
		require.NoError(t, yaml.UnmarshalStrict([]byte(d.yaml), obj), "%s (%s):\n%s", d.source, key, d.yaml)
		name := obj.(metav1.Object).GetName()
		require.NotEmpty(t, name, "%s: %s without a name", d.source, key)
		if o.byKind[tm.Kind] == nil {
			o.byKind[tm.Kind] = map[string]any{}
		}
		_, dup := o.byKind[tm.Kind][name]
		require.False(t, dup, "two %s named %s", tm.Kind, name)
		o.byKind[tm.Kind][name] = obj
		if d.hook {
			o.hooks[tm.Kind+"/"+name] = true
		}
		o.all++
	}
	return o
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

// TestDecodeStrictlyCatchesUnknownFields: the strict decoding the chart tests rely on fails
// on a field the type does not have.
func TestDecodeStrictlyCatchesUnknownFields(t *testing.T) {
	bad := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replica: 2\n"
	require.Error(t, yaml.UnmarshalStrict([]byte(bad), &appsv1.Deployment{}))
	good := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replicas: 2\n"
	require.NoError(t, yaml.UnmarshalStrict([]byte(good), &appsv1.Deployment{}))
}
