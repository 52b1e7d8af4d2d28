package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The report names the broker's priority from the stack's pid file and the process's
// autogroup, and nothing when there is no broker to read or the broker is not scheduled
// through an autogroup.
func TestKafkaPriority(t *testing.T) {
	stack, proc := t.TempDir(), t.TempDir()
	t.Setenv("HERALD_STACK_DIR", stack)
	old := procDir
	procDir = proc
	t.Cleanup(func() { procDir = old })
	require.Empty(t, kafkaPriority("."), "no pid file")

	require.NoError(t, os.MkdirAll(filepath.Join(stack, "kafka"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(stack, "kafka", "kafka.pid"), []byte("4242\n"), 0o644))
	require.Empty(t, kafkaPriority("."), "no such process")

	autogroup := filepath.Join(proc, "4242", "autogroup")
	require.NoError(t, os.MkdirAll(filepath.Dir(autogroup), 0o755))
	for content, want := range map[string]string{
		"/autogroup-93934 nice -10\n": ", broker at nice -10",
		"/autogroup-7 nice 0\n":       ", broker at nice 0",
		"":                            "", // a process in a cgroup's task group
		"garbage\n":                   "",
	} {
		require.NoError(t, os.WriteFile(autogroup, []byte(content), 0o644))
		require.Equal(t, want, kafkaPriority("."), "autogroup %q", content)
	}
}
