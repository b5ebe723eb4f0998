package flows_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/tlsdec"
)

// tlsSegments reads the segments of a TLS capture, payloads copied.
func tlsSegments(t *testing.T, name string) []attempt.SegmentView {
	t.Helper()
	var segs []attempt.SegmentView
	_, err := capture.ReadFile(filepath.Join("..", "testdata", "tls-"+name+".pcap.gz"), capture.Options{Payloads: func(v *attempt.SegmentView) {
		c := *v
		c.Src, c.Dst, c.Payload = bytes.Clone(v.Src), bytes.Clone(v.Dst), bytes.Clone(v.Payload)
		segs = append(segs, c)
	}}, func(attempt.SYN) {})
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// TestAssemblerTLS: what a connection of the TLS 1.3 grpc-js capture
// becomes with its key log, when the capture lost or cut one of the
// server's segments, without a key log, and with a key log that holds
// nothing for it; the other connections are decrypted whole in every
// case but the last two.
func TestAssemblerTLS(t *testing.T) {
	segs := tlsSegments(t, "grpcjs-tls13")
	keys, err := tlsdec.ReadKeyLog(filepath.Join("..", "testdata", "tls-grpcjs-tls13.keylog"))
	if err != nil {
		t.Fatal(err)
	}
	none, err := tlsdec.ParseKeyLog(strings.NewReader("# no secrets\n"), "empty.keylog")
	if err != nil {
		t.Fatal(err)
	}
	// The first connection's client port, and its server's segments that
	// carry bytes.
	port := segs[0].SrcPort
	var serverData []int
	for i, s := range segs {
		if s.DstPort == port && s.PayloadLen > 0 {
			serverData = append(serverData, i)
		}
	}
	if len(serverData) < 3 {
		t.Fatalf("the first connection's server sent %d segments with bytes, want 3 or more", len(serverData))
	}
	second := serverData[1] // after the server's first flight
	type result struct {
		Why, Damaged, NotDecrypted string
		Decoded, Encrypted         bool
		Settings                   bool
	}
	tests := []struct {
		name string
		keys *tlsdec.KeyLog
		edit func(i int, v *attempt.SegmentView) bool // false drops the segment
		// first is what becomes of the first connection; the others are
		// all decrypted whole unless rest is set.
		first result
		rest  *result
	}{
		{name: "whole", keys: keys, first: result{Decoded: true, Settings: true}},
		{name: "a segment of the server's lost", keys: keys, edit: func(i int, _ *attempt.SegmentView) bool { return i != second },
			first: result{Why: tlsdec.WhyDamagedRecord, Decoded: true, Damaged: "TLS: damaged record: "}},
		{name: "a segment of the server's cut by the snap length", keys: keys, edit: func(i int, v *attempt.SegmentView) bool {
			if i == second {
				v.Payload = v.Payload[:len(v.Payload)/2]
			}
			return true
		}, first: result{Why: tlsdec.WhyDamagedRecord, Decoded: true, Damaged: "TLS: damaged record: "}},
		{name: "no key log", first: result{Encrypted: true}, rest: &result{Encrypted: true}},
		{name: "a key log without its lines", keys: none, first: result{Why: tlsdec.WhyNoKey, Encrypted: true, NotDecrypted: "no key: the key log has no line for client random "},
			rest: &result{Why: tlsdec.WhyNoKey, Encrypted: true, NotDecrypted: "no key: the key log has no line for client random "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var conns []flows.Conn
			a := flows.NewAssembler(flows.Options{KeyLog: tt.keys}, func(c flows.Conn) { conns = append(conns, c) })
			for i := range segs {
				v := segs[i]
				if tt.edit != nil && !tt.edit(i, &v) {
					continue
				}
				a.Add(&v)
			}
			a.Close()
			if len(conns) < 2 {
				t.Fatalf("%d connections, want the capture's", len(conns))
			}
			for _, c := range conns {
				r := c.Report
				var got result
				if c.TLS != nil {
					got.Why, got.Decoded = c.TLS.Why, c.TLS.Decoded
				}
				got.Encrypted, got.Settings = r.Encrypted, !flows.ServerSettings(r).IsZero()
				// Details name records and randoms: their starts are compared.
				want := result{Decoded: true, Settings: true}
				if r.Client.Port() == port {
					want = tt.first
				} else if tt.rest != nil {
					want = *tt.rest
				}
				got.Damaged, got.NotDecrypted = prefix(r.Damaged, want.Damaged), prefix(r.NotDecrypted, want.NotDecrypted)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("connection %s: (-want +got)\n%s\ndamaged %q, not decrypted %q", r.Client, diff, r.Damaged, r.NotDecrypted)
				}
				if tt.keys == nil && c.TLS != nil {
					t.Errorf("connection %s: a TLS status without a key log", r.Client)
				}
			}
		})
	}
}

// prefix is s cut to the length of want when it starts with it.
func prefix(s, want string) string {
	if strings.HasPrefix(s, want) {
		return want
	}
	return s
}
