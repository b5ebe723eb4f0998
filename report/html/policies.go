package html

import (
	"net/netip"
	"strings"

	"github.com/backoff-audit/audit/infer"
	"github.com/backoff-audit/audit/internal/text"
)

// policiesView is the Policies section (docs/spec.md §8.5), with --infer.
type policiesView struct {
	Headline string
	Rows     []policyRow
	Outliers []outlierView
}

type policyRow struct {
	N, Peers, Failed, Also                           int
	Share                                            float64
	Schedule                                         string
	Initial, Multiplier, Jitter, Cap, ConnectTimeout string
	Default                                          bool
	Differs, Signatures                              string
}

// outlierView is an outlier and the element of its chain on the page.
type outlierView struct {
	Addr   netip.Addr
	Anchor string
}

// newPoliciesView is the section of r, nil without --infer.
func newPoliciesView(r *infer.Reading, anchors map[netip.Addr]string) *policiesView {
	if r == nil {
		return nil
	}
	ps := &r.Policies
	v := &policiesView{Headline: ps.Headline()}
	for i := range ps.Policies {
		p := &ps.Policies[i]
		row := policyRow{N: p.Policy, Peers: p.Peers, Failed: p.Failed, Also: p.AlsoExplained, Share: p.Share,
			Schedule: p.Schedule(), Default: p.Default, Differs: strings.Join(p.Differs, ", ")}
		row.Initial, row.Multiplier, row.Jitter, row.Cap, row.ConnectTimeout = p.Texts()
		var sigs []string
		for _, s := range p.Signatures {
			sigs = append(sigs, s.Name+" ("+s.Seen+"): "+text.Plural(s.Peers, "peer"))
		}
		row.Signatures = strings.Join(sigs, "; ")
		v.Rows = append(v.Rows, row)
	}
	for _, a := range ps.Outliers {
		v.Outliers = append(v.Outliers, outlierView{Addr: a, Anchor: anchors[a]})
	}
	return v
}
