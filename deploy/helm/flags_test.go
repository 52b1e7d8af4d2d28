package helm_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
)

// The chart, its value files and docs/deploy.md may only name settings herald has: every
// HERALD_* variable and every herald flag they use is checked against what `herald <cmd> -h`
// lists, so a renamed flag cannot leave the chart or the guide behind.

var (
	helpFlag = regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`)
	helpEnv  = regexp.MustCompile(`\(env (HERALD_[A-Z0-9_]+)\)`)
	anyEnv   = regexp.MustCompile(`\bHERALD_[A-Z0-9_]*[A-Z0-9]\b`)
	// A flag in the guide: `--name` in code spans or blocks.
	docFlag = regexp.MustCompile("(?:`|\\s)--([a-z][a-z0-9-]+)")
)

// heraldSettings builds herald and returns the flags and variables of the subcommands the
// chart runs.
func heraldSettings(t *testing.T) (flags, vars map[string]bool) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "herald")
	build := exec.Command("go", "build", "-o", bin, "./cmd/herald")
	build.Dir = "../.."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/herald: %s", out)
	flags, vars = map[string]bool{}, map[string]bool{}
	for _, cmd := range []string{"serve", "migrate", "sim", "apikey", "trace"} {
		args := []string{cmd, "-h"}
		if cmd == "apikey" {
			args = []string{cmd, "create", "-h"}
		}
		help, _ := exec.Command(bin, args...).CombinedOutput()
		for _, m := range helpFlag.FindAllStringSubmatch(string(help), -1) {
			flags[m[1]] = true
		}
		for _, m := range helpEnv.FindAllStringSubmatch(string(help), -1) {
			vars[m[1]] = true
		}
	}
	require.True(t, flags["roles"] && vars["HERALD_DATABASE_URL"], "herald -h lists no flags?")
	return flags, vars
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

func TestEverySettingIsHeralds(t *testing.T) {
	flags, vars := heraldSettings(t)

	// What the chart renders, for every value set.
	for _, set := range valueSets {
		o := decode(t, render(t, values(t, set)))
		for name, obj := range o.byKind["Deployment"] {
			for _, c := range obj.(*appsv1.Deployment).Spec.Template.Spec.Containers {
				for _, e := range c.Env {
					if strings.HasPrefix(e.Name, "HERALD_") {
						require.True(t, vars[e.Name], "%s: %s renders %s, which herald does not read", set, name, e.Name)
					}
				}
				for _, a := range c.Args {
					if f, ok := strings.CutPrefix(a, "--"); ok {
						f, _, _ = strings.Cut(f, "=")
						require.True(t, flags[f], "%s: %s passes --%s, which herald does not have", set, name, f)
					}
				}
			}
		}
	}

	// What the values, the test values, the templates and the guide name.
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
			require.True(t, vars[v], "%s names %s, which herald does not read", f, v)
		}
	}
	b, err := os.ReadFile("../../docs/deploy.md")
	require.NoError(t, err)
	for _, m := range docFlag.FindAllStringSubmatch(string(b), -1) {
		if otherTools[m[1]] {
			continue
		}
		if !flags[m[1]] {
			t.Errorf("docs/deploy.md names --%s, which herald does not have (or add it to otherTools)", m[1])
		}
	}
}

// otherTools are the flags of other programs docs/deploy.md shows: git describe, buildah,
// podman, kubectl and helm.
var otherTools = map[string]bool{
	"tags": true, "always": true, "dirty": true, // git describe
	"storage-driver": true, "isolation": true, "runtime": true, "cgroup-manager": true, // buildah, podman
	"rm": true, "network": true, "read-only": true, // podman run
	"from-literal": true, "set": true, // kubectl create secret, helm install
}
