package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// heraldBin is the herald binary the end-to-end tests run as subprocesses, built once by
// TestMain (without -race: the subprocesses are the system under test, not the test).
var heraldBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "herald-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		os.Exit(2)
	}
	heraldBin = filepath.Join(dir, "herald")
	build := exec.Command("go", "build", "-o", heraldBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "go build ./cmd/herald:", err)
		_ = os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	if msgs := breaches.all(); len(msgs) > 0 {
		fmt.Fprintf(os.Stderr, "%d exchanges departed from docs/openapi.yaml:\n%s\n", len(msgs), strings.Join(msgs, "\n"))
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
