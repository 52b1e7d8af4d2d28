package helm_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// serveGo declares allRoles, the roles `herald serve --roles` takes.
const serveGo = "../../cmd/herald/serve.go"

var (
	rolesOnce sync.Once
	allRoles  []string
	rolesErr  error
)

// heraldRoles returns herald serve's roles, read from allRoles in cmd/herald/serve.go: a role
// added there is a role the chart must run (TestEveryRoleRunsInADeployment).
func heraldRoles(t *testing.T) []string {
	t.Helper()
	rolesOnce.Do(func() { allRoles, rolesErr = parseAllRoles(serveGo) })
	require.NoError(t, rolesErr)
	require.Contains(t, allRoles, "ingest", "%s: allRoles", serveGo)
	return allRoles
}

// parseAllRoles reads the string literals of the package-level `var allRoles = []string{…}`.
func parseAllRoles(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if n.Name != "allRoles" || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.CompositeLit)
				if !ok {
					return nil, fmt.Errorf("%s: allRoles is not a composite literal", path)
				}
				var out []string
				for _, e := range lit.Elts {
					b, ok := e.(*ast.BasicLit)
					if !ok || b.Kind != token.STRING {
						return nil, fmt.Errorf("%s: allRoles has an element that is not a string literal", path)
					}
					r, err := strconv.Unquote(b.Value)
					if err != nil {
						return nil, err
					}
					out = append(out, r)
				}
				if len(out) == 0 {
					return nil, fmt.Errorf("%s: allRoles is empty", path)
				}
				return out, nil
			}
		}
	}
	return nil, fmt.Errorf("%s: no var allRoles", path)
}

// rolesRun returns the roles each `herald serve` Deployment runs, by name: its --roles
// argument, else its HERALD_ROLES, else herald's default (every role).
func rolesRun(o objects, all []string) map[string][]string {
	out := map[string][]string{}
	for name, obj := range o.byKind["Deployment"] {
		c := obj.(*appsv1.Deployment).Spec.Template.Spec.Containers[0]
		if len(c.Args) == 0 || c.Args[0] != "serve" {
			continue
		}
		list, set := "", false
		for _, e := range c.Env {
			if e.Name == "HERALD_ROLES" {
				list, set = e.Value, true
			}
		}
		for i, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--roles="); ok {
				list, set = v, true
			} else if a == "--roles" && i+1 < len(c.Args) {
				list, set = c.Args[i+1], true
			}
		}
		if !set {
			out[name] = all
			continue
		}
		for _, r := range strings.Split(list, ",") {
			out[name] = append(out[name], strings.TrimSpace(r))
		}
	}
	return out
}

// unrun are the roles of all that no Deployment of o runs.
func unrun(o objects, all []string) []string {
	run := map[string]bool{}
	for _, rs := range rolesRun(o, all) {
		for _, r := range rs {
			run[r] = true
		}
	}
	var out []string
	for _, r := range all {
		if !run[r] {
			out = append(out, r)
		}
	}
	return out
}

// Every role of `herald serve` runs in some Deployment, for every value set: a role the chart
// has no Deployment for is work nothing in a Helm installation does (as the events role's
// client webhooks once were).
func TestEveryRoleRunsInADeployment(t *testing.T) {
	all := heraldRoles(t)
	for _, set := range valueSets {
		o := decode(t, render(t, values(t, set)))
		require.Empty(t, unrun(o, all), "%s: roles of %s no Deployment runs", set, serveGo)
	}
	// The check sees a missing role.
	off := decode(t, render(t, with(t, values(t, "default"), "events.enabled", false)))
	require.Equal(t, []string{"events"}, unrun(off, all))
}

// The events role has its Deployment (a consumer group on the events topic, spread over
// nodes, rolled one surge pod at a time), its headless Service for the ServiceMonitor, its
// PodDisruptionBudget and NetworkPolicy; it reads the topic the relay writes, in the group
// the chart names, and never with loopback webhook URLs allowed.
func TestEventsDeployment(t *testing.T) {
	for _, set := range valueSets {
		o := decode(t, render(t, values(t, set)))
		d := get[*appsv1.Deployment](t, o, "Deployment", "herald-events")
		c := d.Spec.Template.Spec.Containers[0]
		require.Equal(t, "events", env(t, c, "HERALD_ROLES"), set)
		require.NotNil(t, d.Spec.Replicas, set)
		require.Equal(t, int32(2), *d.Spec.Replicas, "%s: the default", set)
		require.Equal(t, "0", d.Spec.Strategy.RollingUpdate.MaxUnavailable.String(), set)
		require.NotNil(t, d.Spec.Template.Spec.Affinity.PodAntiAffinity, "%s: spread over nodes", set)
		relay := get[*appsv1.Deployment](t, o, "Deployment", "herald-relay").Spec.Template.Spec.Containers[0]
		for _, v := range []string{"HERALD_EVENTS_TOPIC", "HERALD_EVENTS_PARTITIONS", "HERALD_EVENTS_GROUP", "HERALD_KAFKA_BROKERS"} {
			require.Equal(t, env(t, relay, v), env(t, c, v), "%s: %s of the relay (which writes the topic) and of events", set, v)
		}
		require.Equal(t, "herald.events", env(t, c, "HERALD_EVENTS_TOPIC"), set)
		require.Equal(t, "herald-events", env(t, c, "HERALD_EVENTS_GROUP"), set)
		for _, e := range c.Env {
			require.NotEqual(t, "HERALD_WEBHOOK_ALLOW_LOOPBACK", e.Name, set)
		}
		svc := get[*corev1.Service](t, o, "Service", "herald-events")
		require.Equal(t, "None", svc.Spec.ClusterIP, set)
		require.Equal(t, "admin", svc.Spec.Ports[0].TargetPort.String(), set)
		require.Equal(t, d.Spec.Selector.MatchLabels, svc.Spec.Selector, set)
		pdb := get[*policyv1.PodDisruptionBudget](t, o, "PodDisruptionBudget", "herald-events")
		require.Equal(t, d.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels, set)
		require.Equal(t, "1", pdb.Spec.MaxUnavailable.String(), set)
	}
	nopdb := decode(t, render(t, with(t, values(t, "default"), "events.pdb.enabled", false)))
	require.Nil(t, nopdb.byKind["PodDisruptionBudget"]["herald-events"])
	// Kafka's names come from kafka.*, the same for the relay and events.
	renamed := with(t, with(t, values(t, "default"), "kafka.topics.events", "acme.herald.events"), "kafka.groups.events", "acme-events")
	o := decode(t, render(t, renamed))
	c := get[*appsv1.Deployment](t, o, "Deployment", "herald-events").Spec.Template.Spec.Containers[0]
	relay := get[*appsv1.Deployment](t, o, "Deployment", "herald-relay").Spec.Template.Spec.Containers[0]
	require.Equal(t, "acme.herald.events", env(t, c, "HERALD_EVENTS_TOPIC"))
	require.Equal(t, "acme.herald.events", env(t, relay, "HERALD_EVENTS_TOPIC"))
	require.Equal(t, "acme-events", env(t, c, "HERALD_EVENTS_GROUP"))

	// Its pods call the clients' endpoints: with egress restricted, they get dispatch's rules
	// (dispatch calls providers and WEBHOOK URLs, public addresses too).
	ha := decode(t, render(t, values(t, "ha")))
	np := get[*networkingv1.NetworkPolicy](t, ha, "NetworkPolicy", "herald-events")
	require.Equal(t, "events", np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"])
	require.Equal(t, get[*networkingv1.NetworkPolicy](t, ha, "NetworkPolicy", "herald-dispatch").Spec.Egress, np.Spec.Egress)
	require.True(t, slices.ContainsFunc(np.Spec.Egress, func(r networkingv1.NetworkPolicyEgressRule) bool {
		return len(r.To) == 0 && slices.ContainsFunc(r.Ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port.IntVal == 443 })
	}), "ha.yaml: events reaches any address on 443")
	sm := get[*monitoringv1.ServiceMonitor](t, ha, "ServiceMonitor", "herald")
	require.Contains(t, sm.Spec.Selector.MatchExpressions[0].Values, "events")

	// Disabled: nothing of it.
	off := decode(t, render(t, with(t, values(t, "ha"), "events.enabled", false)))
	for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"} {
		require.Nil(t, off.byKind[kind]["herald-events"], kind)
	}
}
