package helm_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// TestValueSetsRenderAndDecode renders every value set, decodes every object strictly, and
// checks what every set must have: one Deployment per role of herald serve (cmd/herald's
// allRoles) running only that role, the probes on the admin port, the security context,
// resources, credentials from a Secret.
func TestValueSetsRenderAndDecode(t *testing.T) {
	for _, set := range valueSets {
		t.Run(set, func(t *testing.T) {
			o := decode(t, render(t, values(t, set)))
			require.Empty(t, o.byKind["Secret"], "the chart inlines no Secret")
			for _, role := range heraldRoles(t) {
				d := get[*appsv1.Deployment](t, o, "Deployment", "herald-"+role)
				checkPod(t, d.Spec.Template.Spec, "herald-"+role)
				c := d.Spec.Template.Spec.Containers[0]
				require.Equal(t, []string{"serve"}, c.Args)
				require.Equal(t, role, env(t, c, "HERALD_ROLES"), "%s runs its own role only", d.Name)
				require.Equal(t, d.Spec.Selector.MatchLabels, subset(d.Spec.Template.Labels, d.Spec.Selector.MatchLabels))
				require.Equal(t, role, d.Spec.Selector.MatchLabels["app.kubernetes.io/component"])
			}
			relay := get[*appsv1.Deployment](t, o, "Deployment", "herald-relay")
			require.NotNil(t, relay.Spec.Replicas)
			require.GreaterOrEqual(t, *relay.Spec.Replicas, int32(2), "one relay leads, another stands by")
			require.Equal(t, "0", relay.Spec.Strategy.RollingUpdate.MaxUnavailable.String(), "the new relay starts before an old one stops")
			pdb := get[*policyv1.PodDisruptionBudget](t, o, "PodDisruptionBudget", "herald-relay")
			require.Equal(t, "1", pdb.Spec.MinAvailable.String())
			require.Equal(t, relay.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels)
			ingest := get[*corev1.Service](t, o, "Service", "herald-ingest")
			require.Equal(t, "http", ingest.Spec.Ports[0].TargetPort.String())
		})
	}
}

// checkPod checks a herald pod: non-root, read-only, no privilege escalation, no
// capabilities, RuntimeDefault seccomp, no service account token, resources, and the
// credentials from a Secret reference.
func checkPod(t *testing.T, pod corev1.PodSpec, what string) {
	t.Helper()
	checkPodSecurity(t, pod, what)
	c := pod.Containers[0]
	require.Len(t, c.EnvFrom, 1, what)
	require.NotEmpty(t, c.EnvFrom[0].SecretRef.Name, "%s: HERALD_* credentials from a Secret", what)
	if c.Name == "herald" {
		checkProbes(t, c, what)
	}
}

// checkPodSecurity is checkPod without the Secret and the probes (the simulator has
// neither).
func checkPodSecurity(t *testing.T, pod corev1.PodSpec, what string) {
	t.Helper()
	psc := pod.SecurityContext
	require.NotNil(t, psc, what)
	require.True(t, *psc.RunAsNonRoot, what)
	require.Equal(t, int64(65532), *psc.RunAsUser, "%s: the image's user", what)
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type, what)
	require.False(t, *pod.AutomountServiceAccountToken, "%s: herald talks to no Kubernetes API", what)
	require.Len(t, pod.Containers, 1, what)
	c := pod.Containers[0]
	sc := c.SecurityContext
	require.NotNil(t, sc, what)
	require.True(t, *sc.ReadOnlyRootFilesystem, what)
	require.False(t, *sc.AllowPrivilegeEscalation, what)
	require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, what)
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		require.False(t, req.IsZero(), "%s: %s request", what, r)
		require.False(t, lim.IsZero(), "%s: %s limit", what, r)
		require.LessOrEqual(t, req.Cmp(lim), 0, "%s: %s request above its limit", what, r)
	}
	for _, e := range c.Env {
		require.Nil(t, e.ValueFrom, what)
		for _, s := range []string{"PASSWORD", "TOKEN", "DATABASE_URL"} {
			if strings.Contains(e.Name, s) && e.Value != "sim-auth-token" {
				t.Errorf("%s: %s inlined (credentials belong in the Secret)", what, e.Name)
			}
		}
	}
}

// checkProbes: liveness /healthz and readiness /readyz on the admin port, which listens on
// every interface.
func checkProbes(t *testing.T, c corev1.Container, what string) {
	t.Helper()
	admin := port(t, c, "admin")
	require.Equal(t, fmt.Sprintf(":%d", admin), env(t, c, "HERALD_ADMIN_ADDR"), what)
	http := port(t, c, "http")
	require.Equal(t, fmt.Sprintf(":%d", http), env(t, c, "HERALD_HTTP_ADDR"), what)
	for _, p := range []struct {
		probe *corev1.Probe
		path  string
	}{{c.StartupProbe, "/healthz"}, {c.LivenessProbe, "/healthz"}, {c.ReadinessProbe, "/readyz"}} {
		require.NotNil(t, p.probe, what)
		require.Equal(t, p.path, p.probe.HTTPGet.Path, what)
		require.Equal(t, "admin", p.probe.HTTPGet.Port.String(), what)
	}
}

func port(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %s", c.Name, name)
	return 0
}

// env returns the value of a variable of the container's env (it must be there).
func env(t *testing.T, c corev1.Container, name string) string {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	t.Fatalf("container %s has no %s", c.Name, name)
	return ""
}

func subset(m, keys map[string]string) map[string]string {
	out := map[string]string{}
	for k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// The migrations run as a Helm hook before an install's or an upgrade's Deployments, with
// the same image and Secret.
func TestMigrationsJobIsAPreInstallAndPreUpgradeHook(t *testing.T) {
	o := decode(t, render(t, values(t, "default")))
	job := get[*batchv1.Job](t, o, "Job", "herald-migrate")
	require.True(t, o.hooks["Job/herald-migrate"], "the Job is a hook")
	require.Equal(t, "pre-install,pre-upgrade", job.Annotations["helm.sh/hook"])
	require.Contains(t, job.Annotations["helm.sh/hook-delete-policy"], "before-hook-creation")
	pod := job.Spec.Template.Spec
	checkPod(t, pod, "the migrations Job")
	require.Equal(t, []string{"migrate"}, pod.Containers[0].Args)
	require.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
	ingest := get[*appsv1.Deployment](t, o, "Deployment", "herald-ingest")
	require.Equal(t, ingest.Spec.Template.Spec.Containers[0].Image, pod.Containers[0].Image)
	require.Empty(t, pod.ServiceAccountName, "a hook runs before the release's objects exist")

	none := decode(t, render(t, values(t, "minimal")))
	require.Empty(t, none.byKind["Job"], "migrations.enabled: false")
}

// HA: KEDA scales dispatch on each lane's consumer lag, with the groups and topics dispatch
// consumes, and the most processes it may start is what dispatch's degraded mode divides a
// rate limit by.
func TestDispatchScaledByKEDAOnConsumerLag(t *testing.T) {
	o := decode(t, render(t, values(t, "ha")))
	so := get[*kedav1alpha1.ScaledObject](t, o, "ScaledObject", "herald-dispatch")
	d := get[*appsv1.Deployment](t, o, "Deployment", "herald-dispatch")
	require.Nil(t, d.Spec.Replicas, "KEDA owns the replicas")
	require.Equal(t, d.Name, so.Spec.ScaleTargetRef.Name)
	require.Equal(t, "Deployment", so.Spec.ScaleTargetRef.Kind)
	c := d.Spec.Template.Spec.Containers[0]
	high := get[*appsv1.Deployment](t, o, "Deployment", "herald-dispatch-high")
	require.Equal(t, strconv.Itoa(int(*so.Spec.MaxReplicaCount+*high.Spec.Replicas)), env(t, c, "HERALD_DEGRADED_PROCESSES"),
		"the most dispatch processes: KEDA's maximum and HIGH's own")
	require.Len(t, so.Spec.Triggers, 2, "HIGH has its own Deployment")
	for i, p := range []string{"NORMAL", "LOW"} {
		tr := so.Spec.Triggers[i]
		require.Equal(t, "kafka", tr.Type)
		require.Equal(t, env(t, c, "HERALD_DISPATCH_GROUP_"+p), tr.Metadata["consumerGroup"], p)
		require.Equal(t, env(t, c, "HERALD_TOPIC_"+p), tr.Metadata["topic"], p)
		require.Equal(t, env(t, c, "HERALD_KAFKA_BROKERS"), tr.Metadata["bootstrapServers"], p)
		require.NotEmpty(t, tr.Metadata["lagThreshold"], p)
		require.Equal(t, "herald-kafka-scaler", tr.AuthenticationRef.Name)
		require.Equal(t, "scram_sha512", tr.Metadata["sasl"])
	}
	require.Empty(t, o.byKind["HorizontalPodAutoscaler"]["herald-dispatch"], "KEDA makes its own HPA")
	require.NotNil(t, o.byKind["HorizontalPodAutoscaler"]["herald-ingest"], "ingest on CPU")

	// Without HIGH's own Deployment, one trigger per lane.
	all := decode(t, render(t, with(t, values(t, "ha"), "dispatchHigh.enabled", false)))
	require.Len(t, get[*kedav1alpha1.ScaledObject](t, all, "ScaledObject", "herald-dispatch").Spec.Triggers, 3)

	// Without an autoscaler, the replicas are the most dispatch processes.
	def := decode(t, render(t, values(t, "default")))
	dd := get[*appsv1.Deployment](t, def, "Deployment", "herald-dispatch")
	dh := get[*appsv1.Deployment](t, def, "Deployment", "herald-dispatch-high")
	require.Equal(t, strconv.Itoa(int(*dd.Spec.Replicas+*dh.Spec.Replicas)), env(t, dd.Spec.Template.Spec.Containers[0], "HERALD_DEGRADED_PROCESSES"))
	require.Empty(t, def.byKind["ScaledObject"])
}

// HIGH dispatch has a Deployment of its own (herald serve --roles dispatch --lanes HIGH) with
// reserved CPU, requests equal to limits, and the dispatch Deployment runs NORMAL and LOW;
// its Service is scraped, its pods have their NetworkPolicy and PodDisruptionBudget. Disabled,
// dispatch runs every lane and nothing of HIGH's own is rendered.
func TestHighDispatcherOfItsOwn(t *testing.T) {
	for _, set := range valueSets {
		o := decode(t, render(t, values(t, set)))
		high := get[*appsv1.Deployment](t, o, "Deployment", "herald-dispatch-high")
		checkPod(t, high.Spec.Template.Spec, "herald-dispatch-high")
		c := high.Spec.Template.Spec.Containers[0]
		// The OTP pool (dispatchHigh.api, on by default): HIGH's API on the same reserved CPU.
		require.Equal(t, "ingest,dispatch", env(t, c, "HERALD_ROLES"), set)
		require.Equal(t, "HIGH", env(t, c, "HERALD_LANES"), set)
		require.Equal(t, "HIGH", env(t, c, "HERALD_INGEST_PRIORITIES"), set)
		otp := get[*corev1.Service](t, o, "Service", "herald-otp")
		require.Equal(t, "dispatch-high", otp.Spec.Selector["app.kubernetes.io/component"], set)
		require.Equal(t, "http", otp.Spec.Ports[0].TargetPort.StrVal, set)
		for _, e := range get[*appsv1.Deployment](t, o, "Deployment", "herald-ingest").Spec.Template.Spec.Containers[0].Env {
			require.NotEqual(t, "HERALD_INGEST_PRIORITIES", e.Name, "%s: ingest accepts every priority", set)
		}
		require.Equal(t, c.Resources.Limits.Cpu().String(), c.Resources.Requests.Cpu().String(), "%s: HIGH's CPU is reserved", set)
		require.Equal(t, c.Resources.Limits.Memory().String(), c.Resources.Requests.Memory().String(), "%s: Guaranteed QoS", set)
		require.Equal(t, "dispatch-high", high.Spec.Selector.MatchLabels["app.kubernetes.io/component"])
		rest := get[*appsv1.Deployment](t, o, "Deployment", "herald-dispatch").Spec.Template.Spec.Containers[0]
		require.Equal(t, "NORMAL,LOW", env(t, rest, "HERALD_LANES"), set)
		get[*policyv1.PodDisruptionBudget](t, o, "PodDisruptionBudget", "herald-dispatch-high")
		require.NotNil(t, o.byKind["Service"]["herald-dispatch-high"], set)
	}
	ha := decode(t, render(t, values(t, "ha")))
	np := get[*networkingv1.NetworkPolicy](t, ha, "NetworkPolicy", "herald-dispatch-high")
	require.Equal(t, "dispatch-high", np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"])
	sm := get[*monitoringv1.ServiceMonitor](t, ha, "ServiceMonitor", "herald")
	require.Contains(t, sm.Spec.Selector.MatchExpressions[0].Values, "dispatch-high")

	noAPI := decode(t, render(t, with(t, values(t, "ha"), "dispatchHigh.api.enabled", false)))
	c := get[*appsv1.Deployment](t, noAPI, "Deployment", "herald-dispatch-high").Spec.Template.Spec.Containers[0]
	require.Equal(t, "dispatch", env(t, c, "HERALD_ROLES"))
	for _, e := range c.Env {
		require.NotEqual(t, "HERALD_INGEST_PRIORITIES", e.Name, "no OTP pool: HIGH is accepted by ingest")
	}
	require.Nil(t, noAPI.byKind["Service"]["herald-otp"])
	np = get[*networkingv1.NetworkPolicy](t, noAPI, "NetworkPolicy", "herald-dispatch-high")
	for _, r := range np.Spec.Ingress {
		for _, p := range r.Ports {
			require.Equal(t, int32(9090), p.Port.IntVal, "no OTP pool: the admin port only")
		}
	}

	off := decode(t, render(t, with(t, values(t, "ha"), "dispatchHigh.enabled", false)))
	require.Nil(t, off.byKind["Service"]["herald-otp"])
	require.Nil(t, off.byKind["Deployment"]["herald-dispatch-high"])
	require.Nil(t, off.byKind["NetworkPolicy"]["herald-dispatch-high"])
	for _, e := range get[*appsv1.Deployment](t, off, "Deployment", "herald-dispatch").Spec.Template.Spec.Containers[0].Env {
		require.NotEqual(t, "HERALD_LANES", e.Name, "every lane runs in dispatch")
	}
}

// The NetworkPolicy lets in the API port of ingest and the admin port, and nothing else;
// with egress rules, DNS and the rules given.
func TestNetworkPolicy(t *testing.T) {
	o := decode(t, render(t, values(t, "ha")))
	for _, role := range heraldRoles(t) {
		np := get[*networkingv1.NetworkPolicy](t, o, "NetworkPolicy", "herald-"+role)
		require.Equal(t, role, np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"])
		var ports []int32
		for _, r := range np.Spec.Ingress {
			require.NotEmpty(t, r.From, "%s: every ingress rule names its peers in the HA set", role)
			for _, p := range r.Ports {
				ports = append(ports, p.Port.IntVal)
			}
		}
		want := []int32{9090}
		if role == "ingest" || role == "dispatch-high" { // dispatch-high: the OTP pool's API
			want = []int32{8080, 9090}
		}
		require.Equal(t, want, ports, role)
		require.Contains(t, np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress, role)
		require.Len(t, np.Spec.Egress, 3, "%s: DNS and the two rules of ha.yaml", role)
	}
	def := decode(t, render(t, values(t, "default")))
	np := get[*networkingv1.NetworkPolicy](t, def, "NetworkPolicy", "herald-relay")
	require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes, "egress open by default")
	require.Empty(t, decode(t, render(t, values(t, "minimal"))).byKind["NetworkPolicy"])
}

// The staging simulator: its Deployment and Service, and dispatch's SMS and EMAIL senders
// pointed at it.
func TestSimulatorForStaging(t *testing.T) {
	o := decode(t, render(t, values(t, "minimal")))
	sim := get[*appsv1.Deployment](t, o, "Deployment", "herald-sim")
	checkPodSecurity(t, sim.Spec.Template.Spec, "herald-sim")
	args := sim.Spec.Template.Spec.Containers[0].Args
	require.Equal(t, "sim", args[0])
	require.Contains(t, args, "--sim-faults=twilio.unavailable=0.01")
	svc := get[*corev1.Service](t, o, "Service", "herald-sim")
	c := get[*appsv1.Deployment](t, o, "Deployment", "herald-dispatch").Spec.Template.Spec.Containers[0]
	require.Equal(t, "providers", env(t, c, "HERALD_SENDERS"))
	require.Equal(t, fmt.Sprintf("http://%s:%d", svc.Name, svc.Spec.Ports[0].Port), env(t, c, "HERALD_TWILIO_BASE_URL"))
	require.Equal(t, fmt.Sprintf("%s:%d", svc.Name, svc.Spec.Ports[1].Port), env(t, c, "HERALD_SMTP_ADDR"))
	ingest := get[*appsv1.Deployment](t, o, "Deployment", "herald-ingest").Spec.Template.Spec.Containers[0]
	require.False(t, slices.ContainsFunc(ingest.Env, func(e corev1.EnvVar) bool { return e.Name == "HERALD_TWILIO_BASE_URL" }),
		"only dispatch sends")
	require.Empty(t, decode(t, render(t, values(t, "default"))).byKind["Deployment"]["herald-sim"])
}

// Per-role settings and secrets: a role's config wins over the global config, and a role's
// Secret replaces the global one for that role only.
func TestRoleConfigAndSecret(t *testing.T) {
	o := decode(t, render(t, values(t, "ha")))
	relay := get[*appsv1.Deployment](t, o, "Deployment", "herald-relay").Spec.Template.Spec.Containers[0]
	require.Equal(t, "herald-relay-env", relay.EnvFrom[0].SecretRef.Name)
	require.Equal(t, "herald_relay", env(t, relay, "HERALD_RELAY_SLOT"))
	require.Equal(t, "SCRAM-SHA-512", env(t, relay, "HERALD_KAFKA_SASL_MECHANISM"), "the global config")
	ingest := get[*appsv1.Deployment](t, o, "Deployment", "herald-ingest").Spec.Template.Spec.Containers[0]
	require.Equal(t, "herald-env", ingest.EnvFrom[0].SecretRef.Name)
	require.Equal(t, "30s", env(t, ingest, "HERALD_SHUTDOWN_TIMEOUT"))
	d := get[*appsv1.Deployment](t, o, "Deployment", "herald-ingest")
	require.Equal(t, int64(40), *d.Spec.Template.Spec.TerminationGracePeriodSeconds, "the shutdown timeout and a margin")
	var mounts []string
	for _, m := range ingest.VolumeMounts {
		mounts = append(mounts, m.MountPath)
	}
	require.Equal(t, []string{"/tmp", "/etc/herald/kafka", "/etc/herald/fcm"}, mounts)
}

// Values the chart refuses, each with its reason.
func TestRefusedValues(t *testing.T) {
	base := values(t, "default")
	for _, c := range []struct {
		path string
		v    any
		want string
	}{
		{"relay.replicas", 1, "relay.replicas: at least 2"},
		{"existingSecret", "", "existingSecret"},
		{"kafka.brokers", []any{}, "kafka.brokers"},
		{"redis.addr", "", "redis.addr"},
		{"config.HERALD_ROLES", "ingest", "config.HERALD_ROLES is set by the chart"},
		{"dispatch.config.HERALD_KAFKA_BROKERS", "x:9092", "dispatch.config.HERALD_KAFKA_BROKERS is set by the chart"},
		{"dispatchHigh.config.HERALD_LANES", "HIGH,NORMAL", "dispatchHigh.config.HERALD_LANES is set by the chart"},
		{"events.config.HERALD_EVENTS_TOPIC", "other.events", "events.config.HERALD_EVENTS_TOPIC is set by the chart"},
		{"config.HERALD_EVENTS_GROUP", "other-events", "config.HERALD_EVENTS_GROUP is set by the chart"},
		{"relay.config.HERALD_EVENTS_PARTITIONS", "12", "relay.config.HERALD_EVENTS_PARTITIONS is set by the chart"},
		// Loopback webhook URLs would reach the pod's own listeners (the admin port among them).
		{"events.config.HERALD_WEBHOOK_ALLOW_LOOPBACK", "true", "events.config.HERALD_WEBHOOK_ALLOW_LOOPBACK: in a pod, loopback is herald's own listeners"},
		{"config.HERALD_WEBHOOK_ALLOW_LOOPBACK", "1", "config.HERALD_WEBHOOK_ALLOW_LOOPBACK: in a pod"},
		{"config.KAFKA_TLS", "true", "only HERALD_* and OTEL_*"},
		// Credentials inline in config: plain env values in the Deployments.
		{"config.HERALD_DATABASE_URL", "postgres://herald:s3cret@db.internal:5432/herald?sslmode=verify-full",
			"config.HERALD_DATABASE_URL carries a password: put the URL in the Secret named by existingSecret"},
		{"relay.config.HERALD_DATABASE_URL", "host=db.internal user=herald password=s3cret dbname=herald",
			"relay.config.HERALD_DATABASE_URL carries a password"},
		{"config.HERALD_DATABASE_URL", "postgres://db.internal/herald?user=herald&password=s3cret",
			"config.HERALD_DATABASE_URL carries a password"},
		{"config.HERALD_KAFKA_SASL_PASSWORD", "s3cret",
			"config.HERALD_KAFKA_SASL_PASSWORD is a credential: put it in the Secret named by existingSecret"},
		{"dispatch.config.HERALD_TWILIO_AUTH_TOKEN", "s3cret", "dispatch.config.HERALD_TWILIO_AUTH_TOKEN is a credential"},
		{"dispatch.config.HERALD_SENDGRID_API_KEY", "SG.s3cret", "dispatch.config.HERALD_SENDGRID_API_KEY is a credential"},
	} {
		_, err := install(t, with(t, base, c.path, c.v))
		require.Error(t, err, "%s=%v", c.path, c.v)
		require.Contains(t, err.Error(), c.want, "%s=%v", c.path, c.v)
	}
	// A database URL without a password (it is then in PGPASSWORD, in the Secret) and the
	// settings that name a credential without holding one are accepted.
	for path, v := range map[string]string{
		"config.HERALD_DATABASE_URL":                       "postgres://herald@db.internal:5432/herald?sslmode=verify-full&sslrootcert=/etc/herald/pg/ca.pem",
		"relay.config.HERALD_DATABASE_URL":                 "host=db.internal:5432 user=herald_relay dbname=herald",
		"config.HERALD_KAFKA_SASL_PASSWORD_FILE":           "/etc/herald/kafka/password",
		"config.HERALD_KAFKA_SASL_USERNAME":                "herald",
		"dispatch.config.HERALD_TWILIO_API_KEY":            "SK0123",
		"events.config.HERALD_WEBHOOK_ALLOW_LOOPBACK":      "false",
		"events.config.HERALD_EVENTS_ENDPOINT_CONCURRENCY": "8",
	} {
		_, err := install(t, with(t, base, path, v))
		require.NoError(t, err, "%s=%s", path, v)
	}
	both := with(t, with(t, base, "dispatch.autoscaling.keda.enabled", true), "dispatch.autoscaling.cpu.enabled", true)
	_, err := install(t, both)
	require.ErrorContains(t, err, "keda and cpu cannot both be enabled")
}
