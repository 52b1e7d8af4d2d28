package client

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGeneratedCodeIsCurrent runs the go:generate line of doc.go (oapi-codegen at its pinned
// version) into a temporary file and compares it with client.gen.go: the client must be
// what docs/openapi.yaml generates. Run `go generate ./client` when this fails.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	args := generateLine(t)
	out := filepath.Join(t.TempDir(), "client.gen.go")
	i := slices.Index(args, "-o")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("doc.go's go:generate line names no -o file: %q", args)
	}
	args[i+1] = out
	cmd := exec.Command(args[0], args[1:]...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, committed) {
		t.Fatalf("client.gen.go is not what docs/openapi.yaml generates: run go generate ./client")
	}
}

// generateLine is the command of doc.go's go:generate directive.
func generateLine(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if cmd, ok := strings.CutPrefix(sc.Text(), "//go:generate "); ok {
			return strings.Fields(cmd)
		}
	}
	t.Fatal("doc.go has no go:generate line")
	return nil
}
