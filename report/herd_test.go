package report

import (
	"net/netip"
	"testing"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report/herd"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func herdOf(chains []attempt.Chain) herd.Reading {
	return NewPeers(backoff.DefaultPolicy(), backoff.Run{}, Chains(chains)).Herd(backoff.RetryMode{})
}

// TestAuditHerd: an Audit reads the same herd from a Tracker's chains as
// from a slice of the same chains.
func TestAuditHerd(t *testing.T) {
	tr := chainsTracker(3*auditBatch + 17)
	a := NewAudit(50052, backoff.DefaultPolicy(), backoff.Run{}, tr.Chains(), chainsInfo)
	want := herdOf(tr.Peers())
	if diff := cmp.Diff(want, a.Herd(), cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("Audit.Herd (-herd of the chains +got):\n%s", diff)
	}
	if len(want.Offenders) == 0 || want.Offenders[0].Failed == 0 {
		t.Errorf("offenders %+v: want the failing peers", want.Offenders)
	}
}
