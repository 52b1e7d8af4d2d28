package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/internal/heraldtest"
	"github.com/heraldhq/herald/internal/stacktest"
	"github.com/heraldhq/herald/senders/sim"
)

// The container image test builds herald's image the way `make image` does
// (deploy/image/build.sh: a static binary FROM scratch, with buildah) and runs it with podman
// against the local stack: `herald migrate` on an empty database, `herald apikey create`, then
// `herald serve` (every role) as a non-root user on a read-only root file system, which sends
// an OTP by SMS to the simulator. deploy/local/containers.sh installs buildah, podman and runc
// (`make test` runs it); docs/deploy.md explains the flags below.

// podmanFlags are podman's global flags on this kind of machine: vfs storage (no overlay
// mounts for containers), runc with cgroupfs (crun refuses hybrid cgroups).
var podmanFlags = []string{"--storage-driver", "vfs", "--runtime", "runc", "--cgroup-manager", "cgroupfs"}

// imageUser is the numeric user and group of deploy/image/Containerfile.
const imageUser = 65532

// containerTools fails (in CI) or skips (elsewhere) when buildah or podman is missing.
func containerTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"buildah", "podman"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := fmt.Sprintf("%s is needed to build and run the image: deploy/local/containers.sh install (make test runs it)", tool)
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

func podman(args ...string) *exec.Cmd {
	return exec.Command("podman", append(slices.Clone(podmanFlags), args...)...)
}

// podmanOutput runs podman and returns its combined output, failing the test on an error.
func podmanOutput(t *testing.T, args ...string) string {
	t.Helper()
	out, err := podman(args...).CombinedOutput()
	require.NoError(t, err, "podman %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// buildImage runs deploy/image/build.sh for a tag of this test and removes the image when
// the test ends.
func buildImage(t *testing.T, version string) string {
	t.Helper()
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	image := "localhost/herald:" + strings.ReplaceAll(stacktest.Name("test"), "_", "-")
	cmd := exec.Command(filepath.Join(repo, "deploy/image/build.sh"), image)
	cmd.Env = append(os.Environ(), "HERALD_VERSION="+version)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "deploy/image/build.sh:\n%s", out)
	t.Logf("image %s built in %v", image, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if out, err := podman("rmi", "--force", image).CombinedOutput(); err != nil {
			t.Logf("podman rmi %s: %v\n%s", image, err, out)
		}
	})
	return image
}

// startContainer runs `podman run` in the foreground as a proc (output to its log, SIGTERM
// passed on to herald by podman's signal proxy), with the host's network: the local stack
// listens on 127.0.0.1.
func startContainer(t *testing.T, name, image string, env map[string]string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	out, err := os.Create(logPath)
	require.NoError(t, err)
	run := []string{"run", "--rm", "--name", name, "--network=host", "--read-only"}
	for k, v := range env {
		run = append(run, "--env", k+"="+v)
	}
	cmd := podman(append(append(run, image), args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start(), "podman run %s", name)
	p := &proc{t: t, name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			p.dump()
		}
		// A container left behind by a podman client that was killed.
		_ = podman("rm", "--force", "--ignore", name).Run()
	})
	return p
}

// containerPid is the host pid of the container's main process, herald itself (the image has
// no init and no shell).
func containerPid(t *testing.T, name string) int {
	t.Helper()
	out := strings.TrimSpace(podmanOutput(t, "inspect", "--format", "{{.State.Pid}}", name))
	pid, err := strconv.Atoi(out)
	require.NoError(t, err, "podman inspect %s: %q", name, out)
	require.Positive(t, pid)
	return pid
}

// procIDs returns the real, effective, saved and file-system ids of the Uid: or Gid: line of
// /proc/PID/status.
func procIDs(t *testing.T, pid int, field string) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.Fields(rest)
		}
	}
	t.Fatalf("no %s line in /proc/%d/status", field, pid)
	return nil
}

// rootMountOptions returns the mount options of "/" as the process sees it (its mount
// namespace's /proc/PID/mountinfo).
func rootMountOptions(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	require.NoError(t, err)
	var opts []string
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mount-point options ...
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
			opts = strings.Split(f[5], ",") // the last mount on "/" is the one in effect
		}
	}
	require.NotNil(t, opts, "no mount on / in /proc/%d/mountinfo", pid)
	return opts
}

func TestContainerImage(t *testing.T) {
	t.Parallel()
	containerTools(t)
	version := "test-" + strings.TrimPrefix(stacktest.Name("v"), "v_")
	image := buildImage(t, version)
	run := func(args ...string) string {
		return podmanOutput(t, append([]string{"run", "--rm", "--network=host", "--read-only", image}, args...)...)
	}

	// The version stamped by the build; no shell to run anything else with.
	require.Equal(t, "herald "+version, strings.TrimSpace(run("version")))
	out, err := podman("run", "--rm", "--entrypoint", "/bin/sh", image, "-c", "true").CombinedOutput()
	require.Error(t, err, "the image has a shell: %s", out)
	require.Regexp(t, `(?i)/bin/sh.*(no such file|not found)`, string(out), "podman's refusal names the missing shell")
	user := strings.TrimSpace(podmanOutput(t, "image", "inspect", "--format", "{{.Config.User}}", image))
	require.Equal(t, fmt.Sprintf("%d:%d", imageUser, imageUser), user)

	// The test's own topics, Redis prefix and names, on a database with only the first
	// migration applied: the image applies the others.
	st := newStack(t)
	st.dsn = stacktest.PostgresURLAt(t, 1)
	st.args[slices.Index(st.args, "--database-url")+1] = st.dsn
	require.Contains(t, run("migrate", "--database-url", st.dsn), "migrations: applied")
	require.Contains(t, run("migrate", "--database-url", st.dsn), "migrations: up to date")
	m := apiKeyLine.FindStringSubmatch(run("apikey", "create", "--name", "image", "--scopes", "operator", "--database-url", st.dsn))
	require.NotNil(t, m, "no api key printed by herald apikey create")
	key := m[1]

	// The simulator runs on the host; the container reaches its Twilio endpoint on 127.0.0.1.
	sm := startSim(t)
	env := map[string]string{}
	for k, v := range sm.env {
		if k == "HERALD_SENDERS" || strings.HasPrefix(k, "HERALD_TWILIO_") {
			env[k] = v
		}
	}
	addr, admin := heraldtest.FreeAddr(t), heraldtest.FreeAddr(t)
	name := strings.ReplaceAll(stacktest.Name("herald-image"), "_", "-")
	args := append(append([]string{"serve", "--http-addr", addr}, st.args...), fastRecovery...)
	args = append(args, "--admin-addr", admin)
	p := startContainer(t, name, image, env, args...)
	heraldtest.WaitFor(t, 90*time.Second, "herald serve in the container to be ready", func() bool {
		if p.exited() {
			t.Fatal("the herald serve container exited")
		}
		status, _, err := tryJSON(context.Background(), http.MethodGet, "http://"+admin+"/readyz", "", "", "")
		return err == nil && status == http.StatusOK
	})

	// The running process: not root, on a read-only root file system.
	pid := containerPid(t, name)
	want := strconv.Itoa(imageUser)
	require.Equal(t, []string{want, want, want, want}, procIDs(t, pid, "Uid"), "herald's user ids in the container")
	require.Equal(t, []string{want, want, want, want}, procIDs(t, pid, "Gid"), "herald's group ids in the container")
	require.Contains(t, rootMountOptions(t, pid), "ro", "the container's root file system is not read-only")

	// One OTP by SMS, through ingest, the relay, Kafka and dispatch in the container, to the
	// simulator's Twilio.
	base := "http://" + addr
	doJSON(t, http.MethodPut, base+"/api/templates/otp", key, otpTemplate, nil, http.StatusOK, http.StatusCreated)
	doJSON(t, http.MethodPut, base+"/api/users/7", key, `{"phone": "+15550100007", "timeZone": "Europe/Berlin"}`,
		nil, http.StatusOK, http.StatusCreated)
	var ans struct {
		ID         string     `json:"id"`
		Deliveries []delivery `json:"deliveries"`
	}
	code, b, err := tryJSON(context.Background(), http.MethodPost, base+"/api/notifications", key, "image-otp",
		`{"userId": 7, "template": "otp", "channels": ["SMS"], "priority": "HIGH", "payload": {"code": "424242"}}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code, "%s", b)
	require.NoError(t, json.Unmarshal(b, &ans))
	require.Len(t, ans.Deliveries, 1)
	deliveryID := ans.Deliveries[0].ID
	heraldtest.WaitFor(t, 60*time.Second, "the OTP to be SENT", func() bool {
		var got struct {
			Deliveries []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"deliveries"`
		}
		doJSON(t, http.MethodGet, base+"/api/notifications/"+ans.ID, key, "", &got, http.StatusOK)
		require.Len(t, got.Deliveries, 1)
		return got.Deliveries[0].Status == "SENT"
	})
	var twilio []sim.Record
	for _, r := range sm.records(t) {
		if r.Provider == sim.Twilio && r.Outcome.Delivered() {
			twilio = append(twilio, r)
		}
	}
	require.Len(t, twilio, 1, "the simulator's delivered Twilio requests")
	require.Equal(t, deliveryID, twilio[0].Key, "the simulator's record names the delivery")

	// The other roles of the same image: the notification's timeline from the database, and
	// a re-drive through the API (a dry run that finds nothing failed).
	timeline := run("trace", "--database-url", st.dsn, ans.ID)
	require.Contains(t, timeline, deliveryID)
	require.Contains(t, timeline, "SENT")
	require.Contains(t, run("redrive", "--api-url", base, "--api-key", key, "--status", "FAILED",
		"--from", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "--yes"), "nothing to re-drive")

	// A graceful stop: SIGTERM through podman reaches herald, which exits 0.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the container did not stop within 30 s of SIGTERM")
	}
	require.Zero(t, p.cmd.ProcessState.ExitCode(), "exit code of podman run (herald's)")
}
