package herald_test

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/heraldhq/herald"
)

// The attempt outcomes are the values the attempt log's check constraint admits, no more and
// no fewer.
func TestAttemptOutcomesMatchTheAttemptLogConstraint(t *testing.T) {
	sql, err := fs.ReadFile(herald.Migrations(), "00001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`outcome\s+text\s+NOT NULL CHECK \(outcome IN \(([^)]*)\)\)`).FindSubmatch(sql)
	if m == nil {
		t.Fatal("no check constraint on delivery_attempt.outcome in 00001_init.sql")
	}
	var want []string
	for _, v := range strings.Split(string(m[1]), ",") {
		want = append(want, strings.Trim(strings.TrimSpace(v), "'"))
	}
	var got []string
	for _, o := range herald.AttemptOutcomes() {
		got = append(got, string(o))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("AttemptOutcomes() = %v, the attempt log admits %v", got, want)
	}
}
