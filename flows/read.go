package flows

import (
	"cmp"
	"slices"

	"github.com/backoff-audit/audit/analyze"
	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/h2"
)

// Result is what ReadFiles found.
type Result struct {
	// Files lists each file as capture.ReadFile found it.
	Files []analyze.FileInfo `json:"files"`
	// Conns are the decoded connections, in order of start; Findings
	// index them (h2.Finding.Conn).
	Conns    []Conn       `json:"connections"`
	Findings []h2.Finding `json:"findings"`
}

// Reports returns the connections' h2 reports, in the order of Conns.
func (r *Result) Reports() []*h2.Report {
	out := make([]*h2.Report, len(r.Conns))
	for i, c := range r.Conns {
		out[i] = c.Report
	}
	return out
}

// Problems counts the findings that are problems (h2.Finding.Problem).
func (r *Result) Problems() int {
	n := 0
	for _, f := range r.Findings {
		if f.Problem {
			n++
		}
	}
	return n
}

// ReadFiles reads capture files, in the order given (a rotated set in
// time order), through one Assembler, and diagnoses the connections
// decoded. Only the TCP segments of opt.Ports (of every port when it is
// empty) are handed out by the readers. The first file that cannot be
// read stops the read with capture.ReadFile's error, which names the file
// and the offset.
func ReadFiles(paths []string, opt Options, diag h2.DiagnoseOptions) (*Result, error) {
	res := &Result{Conns: []Conn{}}
	a := NewAssembler(opt, func(c Conn) { res.Conns = append(res.Conns, c) })
	for _, path := range paths {
		st, err := capture.ReadFile(path, capture.Options{Payloads: a.Add, PayloadPorts: opt.Ports}, func(analyze.SYN) {})
		if err != nil {
			return nil, err
		}
		res.Files = append(res.Files, st)
	}
	a.Close()
	slices.SortStableFunc(res.Conns, func(x, y Conn) int {
		return cmp.Or(x.Report.Start.Compare(y.Report.Start), x.Report.Client.Compare(y.Report.Client))
	})
	res.Findings = h2.Diagnose(res.Reports(), diag)
	if res.Findings == nil {
		res.Findings = []h2.Finding{}
	}
	return res, nil
}
