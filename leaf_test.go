package herald_test

import (
	"go/build"
	"strings"
	"testing"
)

// The root package is the shared vocabulary every part of herald imports: it must stay a
// leaf that pulls in nothing but the standard library (the migration runner, with pgx and
// goose, lives in internal/migrate).
func TestRootPackageImportsOnlyTheStandardLibrary(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range pkg.Imports {
		if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
			t.Errorf("package herald imports %s; it may import only the standard library", path)
		}
	}
}
