package flows_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http2"

	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/tlsdec"
)

// The real captures of testdata/make-tls-capture.sh: clients of four
// stacks reconnecting to `audit server --retry_mode goaway`, each with the
// key log that decrypts it (testdata/README.md, "TLS captures").
var tlsCaptures = []struct {
	name, version string
}{
	{"grpcjs-tls13", "TLS 1.3"},
	{"grpcjs-tls12", "TLS 1.2"},
	{"grpcgo", "TLS 1.3"},
	{"ccore", "TLS 1.3"},
}

func readTLSCapture(t *testing.T, name string) (*flows.Result, string, string) {
	t.Helper()
	pcap := filepath.Join("..", "testdata", "tls-"+name+".pcap.gz")
	keylog := filepath.Join("..", "testdata", "tls-"+name+".keylog")
	keys, err := tlsdec.ReadKeyLog(keylog)
	if err != nil {
		t.Fatal(err)
	}
	res, err := flows.ReadFiles([]string{pcap}, flows.Options{KeyLog: keys}, h2.DiagnoseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res, pcap, keylog
}

// TestTLSCaptures decrypts every connection of each capture with its key
// log, in the version the client was made to speak, and finds on each the
// server's SETTINGS and its GOAWAY NO_ERROR, as the goaway mode sends
// them (docs/spec.md §7.1).
func TestTLSCaptures(t *testing.T) {
	for _, tc := range tlsCaptures {
		t.Run(tc.name, func(t *testing.T) {
			res, _, _ := readTLSCapture(t, tc.name)
			if len(res.Conns) == 0 {
				t.Fatal("no connection")
			}
			for i, c := range res.Conns {
				r := c.Report
				if c.TLS == nil || !c.TLS.Decoded || c.TLS.Why != "" || c.TLS.Version != tc.version || r.Encrypted || r.Damaged != "" {
					t.Errorf("connection %d (%s): TLS %+v, encrypted %v, damaged %q: want %s, decrypted whole", i, r.Client, c.TLS, r.Encrypted, r.Damaged, tc.version)
					continue
				}
				if flows.ServerSettings(r).IsZero() {
					t.Errorf("connection %d (%s): no SETTINGS from the server", i, r.Client)
				}
				// grpc-js answers with a GOAWAY of its own, now and then.
				var server []string
				for _, g := range h2.GoAways(r) {
					if g.Dir == h2.ServerToClient {
						server = append(server, g.GoAway.Code)
					}
				}
				if !slices.Equal(server, []string{"NO_ERROR"}) {
					t.Errorf("connection %d (%s): the server's GOAWAYs %q, want one NO_ERROR", i, r.Client, server)
				}
			}
		})
	}
}

// frame is an HTTP/2 frame as both tshark and the decoder show it: the
// connection-level ones in order (SETTINGS, PING, GOAWAY, RST_STREAM, with
// their ACK flag, codes and stream ids), and the requests' HEADERS by
// stream id and :path, each at the time of the packet that completed it.
type frame struct {
	Time       time.Time
	Client     bool
	Type       string
	Ack        bool
	Stream     uint32
	Code       string
	LastStream uint32
	Path       string
}

// TestTLSCapturesAgainstTshark decodes each capture as Wireshark does with
// the same key log (`tshark -o tls.keylog_file:FILE`) and wants the same
// frames, connection by connection, frame by frame.
func TestTLSCapturesAgainstTshark(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("SKIPPED: tshark is not installed (.ci/deps.sh tshark installs it): the decryption is not compared with Wireshark's")
	}
	for _, tc := range tlsCaptures {
		t.Run(tc.name, func(t *testing.T) {
			res, pcap, keylog := readTLSCapture(t, tc.name)
			retry := res.Conns[0].Report.Server.Port()
			want := tsharkFrames(t, tshark, pcap, keylog, retry)
			got := map[uint16][]frame{}
			for _, c := range res.Conns {
				got[c.Report.Client.Port()] = decodedFrames(c.Report)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("frames by client port (-tshark +flows)\n%s", diff)
			}
			if len(want) != len(res.Conns) {
				t.Errorf("tshark decodes %d connections, flows %d", len(want), len(res.Conns))
			}
		})
	}
}

// decodedFrames are the frames of one decoded connection.
func decodedFrames(r *h2.Report) []frame {
	var out []frame
	for _, e := range r.Events {
		f := frame{Time: e.Time.UTC(), Client: e.Dir == h2.ClientToServer}
		switch e.Kind {
		case h2.KindSettings, h2.KindSettingsAck:
			f.Type, f.Ack = "SETTINGS", e.Kind == h2.KindSettingsAck
		case h2.KindPing, h2.KindPingAck:
			f.Type, f.Ack = "PING", e.Kind == h2.KindPingAck
		case h2.KindGoAway:
			f.Type, f.Code, f.LastStream = "GOAWAY", e.GoAway.Code, e.GoAway.LastStreamID
		case h2.KindRSTStream:
			f.Type, f.Stream, f.Code = "RST_STREAM", e.Stream, e.Code
		}
		out = append(out, f)
	}
	for _, s := range r.Streams {
		out = append(out, frame{Time: s.Start.UTC(), Client: true, Type: "HEADERS", Stream: s.ID, Path: s.Method})
	}
	sortFrames(out)
	return out
}

// sortFrames orders a connection's frames by time, the connection-level
// ones first in their order where times tie.
func sortFrames(fs []frame) {
	slices.SortStableFunc(fs, func(a, b frame) int { return a.Time.Compare(b.Time) })
}

// tsharkFrames runs tshark on pcap with keylog, its retry port read as
// TLS, and returns each connection's frames by client port.
func tsharkFrames(t *testing.T, tshark, pcap, keylog string, retry uint16) map[uint16][]frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fields := []string{"frame.time_epoch", "tcp.srcport", "tcp.dstport", "http2.type", "http2.flags", "http2.streamid",
		"http2.goaway.error", "http2.goaway.last_stream_id", "http2.rst_stream.error", "http2.headers.path"}
	args := []string{"-r", pcap, "-o", "tls.keylog_file:" + keylog, "-d", fmt.Sprintf("tcp.port==%d,tls", retry),
		"-Y", "http2", "-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.CommandContext(ctx, tshark, args...).Output()
	if err != nil {
		t.Fatalf("tshark %s: %v", strings.Join(args, " "), err)
	}
	frames := map[uint16][]frame{}
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		col := strings.Split(line, "\t")
		if len(col) != len(fields) {
			t.Fatalf("tshark line %q: %d fields, want %d", line, len(col), len(fields))
		}
		at := epoch(t, col[0])
		src, dst := uint16(atou(t, col[1])), uint16(atou(t, col[2]))
		client := dst == retry
		port := src
		if !client {
			port = dst
		}
		list := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		types, flags, streams := list(col[3]), list(col[4]), list(col[5])
		goErrs, goLast, rstErrs, paths := list(col[6]), list(col[7]), list(col[8]), list(col[9])
		for i, typ := range types {
			f := frame{Time: at, Client: client}
			fl, _ := strconv.ParseUint(strings.TrimPrefix(flags[i], "0x"), 16, 8)
			switch http2.FrameType(atou(t, typ)) {
			case http2.FrameSettings:
				f.Type, f.Ack = "SETTINGS", fl&1 != 0
			case http2.FramePing:
				f.Type, f.Ack = "PING", fl&1 != 0
			case http2.FrameGoAway:
				f.Type, f.Code, f.LastStream = "GOAWAY", http2.ErrCode(atou(t, goErrs[0])).String(), atou(t, goLast[0])
				goErrs, goLast = goErrs[1:], goLast[1:]
			case http2.FrameRSTStream:
				f.Type, f.Stream, f.Code = "RST_STREAM", atou(t, streams[i]), http2.ErrCode(atou(t, rstErrs[0])).String()
				rstErrs = rstErrs[1:]
			case http2.FrameHeaders:
				if !client || len(paths) == 0 {
					continue // a response's headers: not in the comparison
				}
				f.Type, f.Stream, f.Path = "HEADERS", atou(t, streams[i]), paths[0]
				paths = paths[1:]
			default:
				continue
			}
			frames[port] = append(frames[port], f)
		}
	}
	for _, fs := range frames {
		sortFrames(fs)
	}
	return frames
}

func atou(t *testing.T, s string) uint32 {
	t.Helper()
	n, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		t.Fatalf("tshark field %q: %v", s, err)
	}
	return uint32(n)
}

// epoch reads tshark's frame.time_epoch, seconds with nine decimals.
func epoch(t *testing.T, s string) time.Time {
	t.Helper()
	sec, frac, _ := strings.Cut(s, ".")
	a, err1 := strconv.ParseInt(sec, 10, 64)
	b, err2 := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("tshark time %q", s)
	}
	return time.Unix(a, b).UTC()
}
