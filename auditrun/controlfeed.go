package auditrun

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/control"
	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/session"
)

// controlFeed follows the control port of a server elsewhere on this host
// (Config.ControlPort): a capture of whole packets on a libpcap handle of
// its own, reassembled (flows), whose ReconnectService calls are decoded
// as each ends (h2) and turned into the events a record file would hold
// (control.Sessions), so that sessions start at Start and end at Stop as
// they do with a record (docs/spec.md §5.6). Its events go through the
// auditor's queue beside the retry port's SYNs, and are placed among them
// by their times, as the record follower's are.
type controlFeed struct {
	port     uint16
	live     *capture.Live
	asm      *flows.Assembler
	sessions control.Sessions
	push     func(session.RecordEvent)
	warn     func(string)
	// midStream counts the connections joined mid-stream; the auditor
	// reads it while run's goroutine writes it.
	midStream atomic.Int64
}

// openControl opens the capture of the control port on iface; file, when
// set, is the --write file it shares with the retry port's capture;
// sessions say what the server's calls do not: its retry mode and connect
// timeout.
func openControl(iface string, port uint16, sessions control.Sessions, file *capture.LiveFile, push func(session.RecordEvent), warn func(string)) (*controlFeed, error) {
	c := &controlFeed{port: port, push: push, warn: warn, sessions: sessions}
	c.asm = flows.NewAssembler(flows.Options{Ports: []uint16{port}, Opened: c.opened, StreamEnd: c.streamEnd}, nil)
	var err error
	c.live, err = capture.OpenLive(capture.LiveConfig{Iface: iface, Port: port, Whole: true, Segments: c.asm.Add, File: file})
	if err != nil {
		return nil, fmt.Errorf("control port %d: %w", port, err)
	}
	return c, nil
}

// run reads the capture until ctx ends (then what its buffer holds) or
// it fails. Only run's goroutine touches the assembler.
func (c *controlFeed) run(ctx context.Context) error {
	err := c.live.Run(ctx, c.asm.AddSYN, nil)
	c.asm.Close()
	if err != nil {
		return fmt.Errorf("control port %d: %w", c.port, err)
	}
	return nil
}

// stats are libpcap's counters of the control port's handle.
func (c *controlFeed) stats() *report.ControlCapture {
	cc := &report.ControlCapture{Port: c.port, MidStream: int(c.midStream.Load())}
	if st, err := c.live.Stats(); err == nil {
		cc.LiveStats = st
	}
	return cc
}

// opened warns of a connection the capture joined mid-stream: its calls
// cannot be decoded, so sessions it starts or stops would go unseen.
func (c *controlFeed) opened(conn flows.Conn) {
	if conn.SYN {
		return
	}
	c.midStream.Add(1)
	c.warn(fmt.Sprintf("control port %d: the connection from %s was open before the capture (joined mid-stream, no SYN seen): "+
		"its Start and Stop calls cannot be decoded, their headers build on an HPACK table the capture never saw; "+
		"sessions it starts or stops are not followed, and their attempts are outside any session. "+
		"Start audit live before the client connects", c.port, conn.Report.Client))
}

// streamEnd turns a finished call into its session event.
func (c *controlFeed) streamEnd(conn flows.Conn, s *h2.Stream) {
	call, ok := control.CallOf(conn.Report, s)
	if !ok {
		return
	}
	if e, ok := c.sessions.Event(call); ok {
		c.push(e)
		return
	}
	what := "Start"
	if call.Kind == control.Stop {
		what = "Stop"
	}
	c.warn(fmt.Sprintf("control port %d: %s from %s at %s (grpc-status %q) begins or ends no session",
		c.port, what, call.Caller, call.Time.UTC().Format(text.TimeLayout), call.Status))
}

// close stops the capture and flushes what it wrote of the --write file.
func (c *controlFeed) close() error {
	if err := c.live.Close(); err != nil {
		return fmt.Errorf("control port %d: %w", c.port, err)
	}
	return nil
}
