package auditrun

import (
	"fmt"
	"io"
	"strings"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/control"
	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/internal/field"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/report/html"
)

// Control is the control port of a capture: its decoded connections and
// their ReconnectService calls (docs/spec.md §5.6).
type Control struct {
	Port  uint16
	Conns []*h2.Report
	Calls []control.Call
}

// Starts counts the control port's Start calls.
func (c *Control) Starts() int {
	n := 0
	for _, call := range c.Calls {
		if call.Kind == control.Start {
			n++
		}
	}
	return n
}

// FindControl reads the control port of capture files whose SYNs pt
// holds: port when it is set, else the port whose connections call the
// ReconnectService, among those whose clients' first bytes are the
// HTTP/2 preface (only those are decoded). It returns nil when port is 0
// and no such port is in the capture; a given port that carries no call
// is an error.
func FindControl(files []string, pt *attempt.PortTracker, port uint16) (*Control, error) {
	candidates := []uint16{port}
	if port == 0 {
		candidates = prefacePorts(pt)
		if len(candidates) == 0 {
			return nil, nil
		}
	}
	res, err := flows.ReadFiles(files, flows.Options{Ports: candidates}, h2.DiagnoseOptions{})
	if err != nil {
		return nil, err
	}
	byPort := map[uint16][]*h2.Report{}
	var found []uint16
	for _, r := range res.Reports() {
		if !control.IsControl(r) {
			continue
		}
		p := r.Server.Port()
		if byPort[p] == nil {
			found = append(found, p)
		}
		byPort[p] = append(byPort[p], r)
	}
	switch {
	case len(found) == 0 && port != 0:
		return nil, field.Errorf("Control", port, "no connection to it in the capture calls %s or %s", control.StartMethod, control.StopMethod)
	case len(found) == 0:
		return nil, nil
	case len(found) > 1:
		return nil, field.Errorf("Control", nil, "the capture holds ReconnectService calls to %d ports (%v): choose the control port", len(found), found)
	}
	return &Control{Port: found[0], Conns: byPort[found[0]], Calls: control.Calls(byPort[found[0]])}, nil
}

// prefacePorts are the ports of pt whose attempts' clients opened with
// the HTTP/2 client preface: plaintext HTTP/2, as a control port is. A
// capture with SYNs to one port has no control port beside a retry port,
// and none is looked for.
func prefacePorts(pt *attempt.PortTracker) []uint16 {
	ports := pt.Ports()
	if len(ports) < 2 {
		return nil
	}
	var out []uint16
	for _, pc := range ports {
		if pt.Tracker(pc.Port).ClientSent(backoff.PayloadH2Preface) {
			out = append(out, pc.Port)
		}
	}
	return out
}

// ChoosePorts finds the capture's control port (FindControl: controlPort,
// or when detect is set one detected) and the retry port to audit (retry,
// or RetryPort). A control port without a Start is named on warn and not
// returned: no session comes from it.
func ChoosePorts(files []string, pt *attempt.PortTracker, retry, controlPort uint16, detect bool, warn io.Writer) (*Control, uint16, error) {
	var ctl *Control
	if detect || controlPort != 0 {
		var err error
		if ctl, err = FindControl(files, pt, controlPort); err != nil {
			return nil, 0, err
		}
	}
	if retry == 0 {
		var err error
		if retry, err = RetryPort(pt, ctl); err != nil {
			return nil, 0, err
		}
	}
	if ctl != nil && ctl.Starts() == 0 {
		fmt.Fprintf(warn, "audit: warning: control port %d calls no Start in the capture: no session to cross-check; the attempts to port %d are audited alone\n",
			ctl.Port, retry)
		ctl = nil
	}
	return ctl, retry, nil
}

// RetryPort is the port a capture's attempts are audited on when none is
// given: the only port with SYNs, or with a control port, the only other.
func RetryPort(pt *attempt.PortTracker, ctl *Control) (uint16, error) {
	if ctl == nil {
		return pt.OnlyPort()
	}
	var others []string
	var port uint16
	for _, pc := range pt.Ports() {
		if pc.Port != ctl.Port {
			port = pc.Port
			others = append(others, fmt.Sprintf("%d (%s)", pc.Port, text.Plural(pc.SYNs, "SYN")))
		}
	}
	switch len(others) {
	case 0:
		return 0, fmt.Errorf("the capture has SYNs to control port %d only: no retry port to audit", ctl.Port)
	case 1:
		return port, nil
	}
	return 0, fmt.Errorf("the capture holds SYNs to %d ports besides control port %d, choose the retry port with --port: %s",
		len(others), ctl.Port, strings.Join(others, ", "))
}

// AuditControl judges each session of the control port's Start and Stop
// calls that overlaps the capture, as AuditRecord judges a record's: the
// verified peer's chain by the cap of the session's own Start (or
// opt.Policy), beside what its Stop answered and the cross-check of its
// backoff_ms against the kernel's intervals. opt.Path is unused.
func AuditControl(opt RecordOptions, ctl *Control, chains []attempt.Chain, capInfo attempt.CaptureInfo) (*report.RecordRun, error) {
	rec := &report.RecordInfo{ControlPort: ctl.Port, Policy: report.PolicyFromRecord,
		Outside: []report.OutsideSession{}, Warnings: []string{}}
	p := opt.DefaultPolicy
	if opt.Policy != nil {
		rec.Policy, p = report.PolicyFromCommandLine, *opt.Policy
	}
	return auditSessions(opt, control.ServerSessions(ctl.Calls, opt.Mode), chains, capInfo, rec, p)
}

// WriteSessions writes a report of sessions (AuditRecord, AuditControl) as
// text or JSON to out, its warnings to errOut, and the HTML page when html
// is set; it returns what Report.Failures counts.
func WriteSessions(out, errOut io.Writer, rep *report.RecordRun, asJSON bool, htmlPath string) (failed, total int, first string, err error) {
	for _, w := range rep.Record.Warnings {
		fmt.Fprintf(errOut, "audit: warning: %s\n", w)
	}
	if n := len(rep.Record.Outside); n > 0 {
		from := rep.Record.Path
		if rep.Record.ControlPort != 0 {
			from = fmt.Sprintf("control port %d", rep.Record.ControlPort)
		}
		fmt.Fprintf(errOut, "audit: warning: %s of %s lie outside the capture (another time or retry port): not judged\n",
			text.Plural(n, "session"), from)
	}
	if asJSON {
		err = rep.WriteJSON(out)
	} else {
		err = rep.WriteText(out)
	}
	if err == nil && htmlPath != "" {
		if err = html.WriteFile(htmlPath, rep); err != nil {
			err = field.Errorf("HTML", htmlPath, "%w", err)
		}
	}
	failed, total, first = rep.Failures()
	return failed, total, first, err
}
