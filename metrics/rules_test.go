package metrics

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"
	"time"
)

// rulesDir holds the alert rules on these metrics and their unit tests.
const rulesDir = "../deploy/prometheus"

// TestAlertRules runs promtool on the alert rules: they load, and each
// alert fires on the series that should fire it and on no other
// (audit-rules.test.yml).
func TestAlertRules(t *testing.T) {
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool missing in CI: .ci/deps.sh installs Debian's prometheus")
		}
		t.Skip("SKIPPED, NOT RUN: promtool missing (apt-get install prometheus, or .ci/deps.sh)")
	}
	for _, args := range [][]string{{"check", "rules", "audit-rules.yml"}, {"test", "rules", "audit-rules.test.yml"}} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Dir = rulesDir
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// TestRulesNameSeries: every series the rules read is one the exposition
// has, so that a renamed metric cannot leave an alert that never fires.
func TestRulesNameSeries(t *testing.T) {
	m := New()
	m.Watch(1)
	m.AddCapture("lo", stats{}, func() uint64 { return 0 })
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, f := range fams {
		have = append(have, f.GetName())
	}
	for _, file := range []string{"audit-rules.yml", "audit-rules.test.yml"} {
		b, err := os.ReadFile(rulesDir + "/" + file)
		if err != nil {
			t.Fatal(err)
		}
		used := regexp.MustCompile(`\baudit_[a-z_]+`).FindAllString(string(b), -1)
		if len(used) == 0 {
			t.Errorf("%s reads no audit_ series", file)
		}
		for _, name := range used {
			if !slices.Contains(have, name) {
				t.Errorf("%s reads %s, which the exposition does not have", file, name)
			}
		}
	}
}
