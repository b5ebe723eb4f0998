package realclients

// The readings of one run: every way the product reads the run's wire,
// driven in this process through the packages behind each verb.
//
//   - audit live: auditrun.Run with its in-process server, whose ports the
//     client is given, capturing on lo and writing its capture (--write);
//   - audit live --attach --record: auditrun.Run beside that server,
//     following its record file;
//   - audit live --attach --control_port: auditrun.Run beside it, following
//     its control port, writing a pcapng of both ports (--write);
//   - audit pcap --record: auditrun.AuditFiles on the first capture and the
//     record file;
//   - audit pcap: auditrun.AuditFiles on the capture of both ports, whose
//     control port gives the sessions.
//
// Each writes its JSON document, which report.Report reads back.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backoff-audit/audit/auditrun"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/server"
	"github.com/backoff-audit/audit/session"
)

// Names of the readings, as a user runs them.
const (
	readLive          = "audit live"
	readAttach        = "audit live --attach --record"
	readAttachControl = "audit live --attach --control_port"
	readPcapRecord    = "audit pcap --record"
	readPcapControl   = "audit pcap (control port)"
)

// readingOrder is the order readings are compared and logged in; the
// first is the one the others are held to.
var readingOrder = []string{readLive, readAttach, readAttachControl, readPcapRecord, readPcapControl}

// noCapture says why this process cannot capture on lo ("" when it can):
// without a capture there is no reading but the server's.
var noCapture = sync.OnceValue(func() string {
	l, err := capture.OpenLive(capture.LiveConfig{Iface: "lo", Port: 9})
	if err != nil {
		return fmt.Sprintf("live capture on lo needs root or CAP_NET_RAW+CAP_NET_ADMIN: %v", err)
	}
	l.Close()
	return ""
})

// auditor is one auditrun.Run in this process, writing JSON.
type auditor struct {
	name        string
	out, errOut testutil.SyncBuffer
	cancel      context.CancelFunc
	done        chan error // Run's error, once it returned
	outcome     auditrun.Outcome
}

// auditorLimit bounds a live reading's run: the longest client run and
// its wait for Start and Stop.
const auditorLimit = 3 * time.Minute

// captureBuffer is each live reading's capture ring: a run sends at most
// a few thousand packets a second (a reconnect storm), and ~40 runs at
// once with the default 64 MiB each would have the kernel allocate
// gigabytes, stalling the servers in this process for hundreds of ms.
const captureBuffer = 4 << 20

// startAuditor runs auditrun.Run with cfg on lo until stop, and waits for
// its capture to open.
func startAuditor(t *testing.T, name string, cfg auditrun.Config) *auditor {
	t.Helper()
	cfg.Iface, cfg.JSON, cfg.BufferSize = "lo", true, captureBuffer
	a := &auditor{name: name, done: make(chan error, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), auditorLimit)
	a.cancel = cancel
	go func() {
		o, err := auditrun.Run(ctx, cfg, &a.out, &a.errOut)
		a.outcome = o
		a.done <- err
	}()
	t.Cleanup(func() { a.stop(t) })
	testutil.WaitFor(t, name+"'s capture to open", a.done, func() bool {
		return strings.Contains(a.errOut.String(), "capturing SYNs")
	})
	return a
}

// stop interrupts the run as Ctrl-C does and returns its error; again, it
// returns the same.
func (a *auditor) stop(t *testing.T) error {
	t.Helper()
	a.cancel()
	select {
	case err := <-a.done:
		a.done <- err
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not end within 30 s of its interrupt\nstderr:\n%s", a.name, a.errOut.String())
		return nil
	}
}

// liveAddrs is how audit live names its server's ports.
var liveAddrs = regexp.MustCompile(`control port \S+:(\d+), retry port \S+:(\d+)`)

// liveReadings are the live readings of one run while it goes on.
type liveReadings struct {
	dir            string
	control, retry int
	record         string
	live, attach   *auditor
	attachControl  *auditor
	// policy, mode and connectSet are what a user of the control-port
	// reading offline gives: the mode, and with a connect timeout other
	// than the spec's the policy (--min_connect_timeout, --max_backoff).
	policy     backoff.Policy
	mode       backoff.RetryMode
	connectSet bool
}

// startReadings starts audit live with the server cfg, whose record goes
// to a file in dir, then the two attached readings beside it.
func startReadings(t *testing.T, cfg server.Config, dir string, p backoff.Policy, connectSet bool) *liveReadings {
	t.Helper()
	r := &liveReadings{dir: dir, record: filepath.Join(dir, "record.jsonl"), policy: p, mode: cfg.Mode, connectSet: connectSet}
	f, err := server.OpenRecord(r.record, cfg.Logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cfg.Record = f
	r.live = startAuditor(t, readLive, auditrun.Config{Server: cfg, Write: filepath.Join(dir, "live.pcap")})
	m := liveAddrs.FindStringSubmatch(r.live.errOut.String())
	if m == nil {
		t.Fatalf("%s named no ports:\n%s", readLive, r.live.errOut.String())
	}
	r.control, _ = strconv.Atoi(m[1])
	r.retry, _ = strconv.Atoi(m[2])
	// What a user attached beside that server gives: its retry port, its
	// record or control port, its mode and connect timeout.
	attached := server.Config{Mode: cfg.Mode, MinConnectTimeout: cfg.MinConnectTimeout}
	r.attach = startAuditor(t, readAttach, auditrun.Config{Attach: true, RetryPort: r.retry, Record: r.record, Server: attached})
	r.attachControl = startAuditor(t, readAttachControl, auditrun.Config{Attach: true, RetryPort: r.retry, ControlPort: r.control,
		Server: attached, Write: filepath.Join(dir, "both.pcapng")})
	return r
}

// reading is one reading's document, and what its run returned.
type reading struct {
	name    string
	doc     report.Report
	outcome auditrun.Outcome
	err     error
	errOut  string
}

// chain is the reading's verdict on the session's verified peer: its
// peer report; nil when it has none.
func (r *reading) chain() *report.PeerReport {
	want := ""
	if s := r.session(); s != nil {
		want = s.VerifiedPeer
	}
	for i := range r.doc.Peers {
		if r.doc.Peers[i].Peer.String() == want {
			return &r.doc.Peers[i]
		}
	}
	return nil
}

// session is the session the reading judged: a live report's, or the one
// session of a record run.
func (r *reading) session() *report.SessionInfo {
	if r.doc.Session != nil {
		return r.doc.Session
	}
	if len(r.doc.Sessions) == 1 {
		return &r.doc.Sessions[0].Session
	}
	return nil
}

// server is what the reading has of Stop's answer.
func (r *reading) server() *report.ServerVerdict {
	if len(r.doc.Sessions) == 1 {
		return r.doc.Sessions[0].Server
	}
	return r.doc.Server
}

// crossCheck is the reading's cross-check of the server's list.
func (r *reading) crossCheck() *session.CrossCheck {
	if len(r.doc.Sessions) == 1 {
		return r.doc.Sessions[0].CrossCheck
	}
	return r.doc.CrossCheck
}

// readings are the five readings of one run, by name.
type readings map[string]*reading

// finish waits for each live reading's report of the run's one session,
// stops them, and makes the two offline readings of what they wrote.
func (r *liveReadings) finish(t *testing.T) readings {
	t.Helper()
	out := readings{}
	for _, a := range []*auditor{r.live, r.attach, r.attachControl} {
		// A reading reports a session once its lists are complete: at
		// most about a second after Stop (the record's poll, the catch-up
		// wait). Waiting for it, not for a fixed time, keeps runs short.
		testutil.WaitFor(t, a.name+"'s session report", a.done, func() bool {
			return bytes.Contains(a.out.Bytes(), []byte("\n"))
		})
	}
	// The attached readings first: the server they follow goes with audit
	// live.
	for _, a := range []*auditor{r.attach, r.attachControl, r.live} {
		err := a.stop(t)
		rd := &reading{name: a.name, outcome: a.outcome, err: err, errOut: a.errOut.String()}
		rd.doc, rd.err = decodeOne(a.out.Bytes(), rd.err)
		out[a.name] = rd
	}
	files := func(name string, files []string, cfg auditrun.FilesConfig) {
		cfg.Port, cfg.PortSet, cfg.JSON = uint16(r.retry), true, true
		var stdout, stderr bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		o, err := auditrun.AuditFiles(ctx, files, cfg, &stdout, &stderr)
		rd := &reading{name: name, outcome: o, err: err, errOut: stderr.String()}
		rd.doc, rd.err = decodeOne(stdout.Bytes(), rd.err)
		out[name] = rd
	}
	files(readPcapRecord, []string{filepath.Join(r.dir, "live.pcap")},
		auditrun.FilesConfig{Record: r.record, Policy: backoff.DefaultPolicy()})
	ctl := auditrun.FilesConfig{Control: uint16(r.control), Mode: r.mode, ModeSet: true, Policy: backoff.DefaultPolicy()}
	if r.connectSet {
		ctl.Policy, ctl.PolicySet = r.policy, true
	}
	files(readPcapControl, []string{filepath.Join(r.dir, "both.pcapng")}, ctl)
	return out
}

// decodeOne reads the one JSON document of b; more, or none, is an error
// beside err.
func decodeOne(b []byte, err error) (report.Report, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var docs []report.Report
	for {
		var d report.Report
		derr := dec.Decode(&d)
		if errors.Is(derr, io.EOF) {
			break
		}
		if derr != nil {
			return report.Report{}, errors.Join(err, fmt.Errorf("JSON document %d: %v", len(docs)+1, derr))
		}
		docs = append(docs, d)
	}
	if len(docs) != 1 {
		return report.Report{}, errors.Join(err, fmt.Errorf("%d JSON documents, want 1 (one session)", len(docs)))
	}
	return docs[0], err
}

// keepFiles copies a run's files (captures, record) to $REALCLIENTS_KEEP
// when it is set, for a look at a run that failed.
func keepFiles(t *testing.T, dir string) {
	keep := os.Getenv("REALCLIENTS_KEEP")
	if keep == "" {
		return
	}
	to := filepath.Join(keep, strings.NewReplacer("/", "_", "=", "_", ",", "_").Replace(t.Name()))
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Logf("REALCLIENTS_KEEP: %v", err)
		return
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err == nil {
			err = os.WriteFile(filepath.Join(to, e.Name()), b, 0o644)
		}
		if err != nil {
			t.Logf("REALCLIENTS_KEEP: %v", err)
		}
	}
	t.Logf("files of the run kept in %s", to)
}
