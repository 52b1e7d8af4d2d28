package helm_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// The chart, its value files and docs/deploy.md may only name settings herald has: every
// HERALD_* variable and every herald flag a container passes is checked against what `herald
// <subcommand> -h` lists for the subcommand that container runs, and every variable and flag
// the files name against all of herald's, so a renamed flag cannot leave the chart or the guide
// behind.

var (
	helpFlag = regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)
	helpEnv  = regexp.MustCompile(`\(env (HERALD_[A-Z0-9_]+)\)`)
	// A variable herald marks secret: its usage ends "(env HERALD_X) (secret; …".
	helpSecret = regexp.MustCompile(`\(env (HERALD_[A-Z0-9_]+)\) \(secret;`)
	anyEnv     = regexp.MustCompile(`\bHERALD_[A-Z0-9_]*[A-Z0-9]\b`)
	// A flag in the guide: `--name` in code spans or blocks.
	docFlag = regexp.MustCompile("(?:`|\\s)--([a-z][a-z0-9-]+)")
)

// settings are the flags and variables of one herald subcommand, and the variables it marks
// secret.
type settings struct {
	flags, vars, secrets map[string]bool
}

// subcommands are the herald subcommands whose settings the chart and the guide may name; the
// chart's containers run the first three.
var subcommands = []string{"serve", "migrate", "sim", "apikey", "trace"}

var (
	heraldOnce sync.Once
	heraldBy   map[string]settings
	heraldErr  error
)

// heraldSettings builds herald once and returns the settings of each subcommand, from its -h.
func heraldSettings(t *testing.T) map[string]settings {
	t.Helper()
	heraldOnce.Do(func() {
		dir, err := os.MkdirTemp("", "herald-chart-test")
		if err != nil {
			heraldErr = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "herald")
		build := exec.Command("go", "build", "-o", bin, "./cmd/herald")
		build.Dir = "../.."
		if out, err := build.CombinedOutput(); err != nil {
			heraldErr = fmt.Errorf("go build ./cmd/herald: %w\n%s", err, out)
			return
		}
		heraldBy = map[string]settings{}
		for _, cmd := range subcommands {
			args := []string{cmd, "-h"}
			if cmd == "apikey" {
				args = []string{cmd, "create", "-h"}
			}
			help, _ := exec.Command(bin, args...).CombinedOutput()
			s := settings{flags: map[string]bool{}, vars: map[string]bool{}, secrets: map[string]bool{}}
			for _, m := range helpFlag.FindAllStringSubmatch(string(help), -1) {
				s.flags[m[1]] = true
			}
			for _, m := range helpEnv.FindAllStringSubmatch(string(help), -1) {
				s.vars[m[1]] = true
			}
			for _, m := range helpSecret.FindAllStringSubmatch(string(help), -1) {
				s.secrets[m[1]] = true
			}
			heraldBy[cmd] = s
		}
	})
	require.NoError(t, heraldErr)
	s := heraldBy["serve"]
	require.True(t, s.flags["roles"] && s.vars["HERALD_DATABASE_URL"], "herald serve -h lists no flags?")
	require.True(t, heraldBy["migrate"].vars["HERALD_DATABASE_URL"], "herald migrate -h lists no flags?")
	require.NotEmpty(t, s.secrets, "herald serve -h marks no setting secret?")
	return heraldBy
}

// union is the settings of every subcommand together.
func union(by map[string]settings) settings {
	u := settings{flags: map[string]bool{}, vars: map[string]bool{}, secrets: map[string]bool{}}
	for _, s := range by {
		for k := range s.flags {
			u.flags[k] = true
		}
		for k := range s.vars {
			u.vars[k] = true
		}
		for k := range s.secrets {
			u.secrets[k] = true
		}
	}
	return u
}

// notAFlag are the HERALD_* variables that are not herald settings: the simulator's URLs it
// prints for people and tests, deploy/image/build.sh's, the local stack's and the tests'.
func notAFlag(v string) bool {
	switch v {
	case "HERALD_SIM_URL", "HERALD_SIM_WEBHOOK_URL", "HERALD_IMAGE", "HERALD_VERSION", "HERALD_STACK_DIR":
		return true
	}
	return strings.HasPrefix(v, "HERALD_TEST_")
}

// podSpecs are the pods of every Deployment and Job of a rendering, by kind/name.
func podSpecs(o objects) map[string]corev1.PodSpec {
	out := map[string]corev1.PodSpec{}
	for name, obj := range o.byKind["Deployment"] {
		out["Deployment/"+name] = obj.(*appsv1.Deployment).Spec.Template.Spec
	}
	for name, obj := range o.byKind["Job"] {
		out["Job/"+name] = obj.(*batchv1.Job).Spec.Template.Spec
	}
	return out
}

// checkContainerSettings checks one container against the settings of the subcommand it runs
// (its first argument): every HERALD_* variable of its env and every --flag of its arguments.
func checkContainerSettings(t *testing.T, by map[string]settings, what string, c corev1.Container) string {
	t.Helper()
	require.NotEmpty(t, c.Args, "%s: no subcommand", what)
	cmd := c.Args[0]
	s, ok := by[cmd]
	require.True(t, ok, "%s runs `herald %s`, which is not one of %v", what, cmd, subcommands)
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "HERALD_") {
			require.True(t, s.vars[e.Name], "%s: %s renders %s, which `herald %s` does not read", what, c.Name, e.Name, cmd)
		}
	}
	for _, a := range c.Args[1:] {
		f, ok := strings.CutPrefix(a, "--")
		require.True(t, ok, "%s: argument %q of `herald %s` is not a --flag", what, a, cmd)
		f, _, _ = strings.Cut(f, "=")
		require.True(t, s.flags[f], "%s: %s passes --%s, which `herald %s` does not have", what, c.Name, f, cmd)
	}
	return cmd
}

func TestEverySettingIsHeralds(t *testing.T) {
	by := heraldSettings(t)

	// What the chart renders, for every value set: each container of a Deployment or a Job
	// against the subcommand it runs.
	ran := map[string]bool{}
	for _, set := range valueSets {
		o := decode(t, render(t, values(t, set)))
		pods := podSpecs(o)
		require.NotEmpty(t, pods, set)
		for name, pod := range pods {
			for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
				ran[checkContainerSettings(t, by, set+": "+name, c)] = true
			}
		}
	}
	for _, cmd := range []string{"serve", "migrate", "sim"} {
		require.True(t, ran[cmd], "no value set renders a container of `herald %s`: its settings went unchecked", cmd)
	}

	// What the values, the test values, the templates and the guide name.
	all := union(by)
	files := []string{"herald/values.yaml", "../../docs/deploy.md"}
	for _, glob := range []string{"testdata/*.yaml", "herald/templates/*"} {
		m, err := filepath.Glob(glob)
		require.NoError(t, err)
		files = append(files, m...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, loc := range anyEnv.FindAllIndex(b, -1) {
			v := string(b[loc[0]:loc[1]])
			if strings.HasPrefix(string(b[loc[1]:]), "_*") || notAFlag(v) {
				continue // HERALD_TOPIC_*: a family of variables
			}
			require.True(t, all.vars[v], "%s names %s, which herald does not read", f, v)
		}
	}
	b, err := os.ReadFile("../../docs/deploy.md")
	require.NoError(t, err)
	for _, m := range docFlag.FindAllStringSubmatch(string(b), -1) {
		if otherTools[m[1]] {
			continue
		}
		if !all.flags[m[1]] {
			t.Errorf("docs/deploy.md names --%s, which herald does not have (or add it to otherTools)", m[1])
		}
	}
}

// Every setting herald marks secret is refused in config, globally and per role: credentials
// come from the Secret, never from plain env values in the Deployments.
func TestChartRefusesHeraldsSecretsInConfig(t *testing.T) {
	secrets := union(heraldSettings(t)).secrets
	base := values(t, "default")
	for v := range secrets {
		for _, where := range []string{"config", "relay.config", "dispatchHigh.config", "events.config"} {
			_, err := install(t, with(t, base, where+"."+v, "s3cret"))
			require.Error(t, err, "%s.%s inline", where, v)
			require.Contains(t, err.Error(), where+"."+v+" is a credential: put it in the Secret named by existingSecret", "%s.%s", where, v)
		}
	}
}

// otherTools are the flags of other programs docs/deploy.md shows: git describe, buildah,
// podman, kubectl, helm and gcloud.
var otherTools = map[string]bool{
	"tags": true, "always": true, "dirty": true, // git describe
	"storage-driver": true, "isolation": true, "runtime": true, "cgroup-manager": true, // buildah, podman
	"rm": true, "network": true, "read-only": true, // podman run
	"from-literal": true, "set": true, // kubectl create secret, helm install
	"cluster": true, "location": true, "partitions": true, "replication-factor": true, // gcloud managed-kafka topics create
}
