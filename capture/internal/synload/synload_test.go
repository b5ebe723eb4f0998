//go:build linux

package synload

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/backoff-audit/audit/internal/testutil"
)

// The frames decode with gopacket, checksums and all, to what was asked.
func TestFrames(t *testing.T) {
	tests := []struct {
		name     string
		src, dst netip.Addr
		sport    uint16
		dport    uint16
		seq      uint32
	}{
		{"ipv4", netip.MustParseAddr("127.77.0.1"), Dst4, 1024, 50052, 1},
		{"ipv4 high port and seq", netip.MustParseAddr("127.77.253.254"), Dst4, 65535, 1, 0xffffffff},
		{"ipv6", Dst6, Dst6, 1024, 50052, 0x80000000},
		{"ipv6 low", Dst6, Dst6, 1, 65535, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var data []byte
			var first gopacket.LayerType
			if tt.src.Is4() {
				data = make([]byte, ipv4HeaderLen+tcpHeaderLen)
				PutIPv4SYN(data, tt.src, tt.dst, tt.sport, tt.dport, tt.seq)
				first = layers.LayerTypeIPv4
			} else {
				data = make([]byte, ipv6HeaderLen+tcpHeaderLen)
				PutIPv6SYN(data, tt.src, tt.dst, tt.sport, tt.dport, tt.seq)
				first = layers.LayerTypeIPv6
			}
			p := gopacket.NewPacket(data, first, gopacket.Default)
			if el := p.ErrorLayer(); el != nil {
				t.Fatalf("decode: %v", el.Error())
			}
			var src, dst netip.Addr
			switch ipl := p.NetworkLayer().(type) {
			case *layers.IPv4:
				src, dst = netip.AddrFrom4([4]byte(ipl.SrcIP.To4())), netip.AddrFrom4([4]byte(ipl.DstIP.To4()))
				// A header whose checksum field is right sums to 0xffff.
				if got := fold(sum(0, data[:ipv4HeaderLen])); got != 0xffff {
					t.Errorf("IPv4 header checksum: sum %#x, want 0xffff", got)
				}
			case *layers.IPv6:
				src, dst = netip.AddrFrom16([16]byte(ipl.SrcIP)), netip.AddrFrom16([16]byte(ipl.DstIP))
			default:
				t.Fatalf("network layer %T", ipl)
			}
			tcp, ok := p.TransportLayer().(*layers.TCP)
			if !ok {
				t.Fatalf("transport layer %T", p.TransportLayer())
			}
			if err := tcp.SetNetworkLayerForChecksum(p.NetworkLayer()); err != nil {
				t.Fatal(err)
			}
			if err, res := tcp.VerifyChecksum(); err != nil || !res.Valid {
				t.Errorf("TCP checksum: %v, %+v", err, res)
			}
			if src != tt.src || dst != tt.dst || uint16(tcp.SrcPort) != tt.sport || uint16(tcp.DstPort) != tt.dport || tcp.Seq != tt.seq {
				t.Errorf("got %v:%d → %v:%d seq %d; want %v:%d → %v:%d seq %d",
					src, tcp.SrcPort, dst, tcp.DstPort, tcp.Seq, tt.src, tt.sport, tt.dst, tt.dport, tt.seq)
			}
			if !tcp.SYN || tcp.ACK || tcp.RST || tcp.FIN || len(tcp.Payload) != 0 {
				t.Errorf("flags SYN %v ACK %v RST %v FIN %v, payload %d; want a bare SYN", tcp.SYN, tcp.ACK, tcp.RST, tcp.FIN, len(tcp.Payload))
			}
			if len(tcp.Options) != 1 || tcp.Options[0].OptionType != layers.TCPOptionKindMSS {
				t.Errorf("options %v; want MSS", tcp.Options)
			}
		})
	}
}

// Every SYN of a run is a new attempt: IPv4 4-tuples are distinct for
// sources × 64 512 SYNs, and ISNs differ throughout.
func TestTuplesDistinct(t *testing.T) {
	const sources = 3
	type tuple struct {
		src  netip.Addr
		port uint16
	}
	seen := make(map[tuple]bool, sources*64512)
	for i := range sources * 64512 {
		src, port, _ := Tuple4(i, sources)
		if !src.Is4() || !netip.MustParsePrefix("127.77.0.0/16").Contains(src) || port < 1024 {
			t.Fatalf("SYN %d: source %v:%d; want 127.77.0.0/16, port ≥ 1024", i, src, port)
		}
		k := tuple{src, port}
		if seen[k] {
			t.Fatalf("SYN %d repeats %v:%d", i, src, port)
		}
		seen[k] = true
	}
	isns := make(map[uint32]bool, 1<<20)
	for i := range 1 << 20 {
		_, _, s4 := Tuple4(i, sources)
		_, _, s6 := Tuple6(i)
		if isns[s4] || s4 != s6 {
			t.Fatalf("SYN %d: ISN %d repeats, or IPv4 %d and IPv6 %d differ", i, s4, s4, s6)
		}
		isns[s4] = true
	}
}

func TestConfigBounds(t *testing.T) {
	ok := Config{Port: 9, Rate: 1, Count: 1, Duration: time.Second}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"port 0", func(c *Config) { c.Port = 0 }, "port 0"},
		{"no rate", func(c *Config) { c.Rate = 0 }, "rate"},
		{"no count", func(c *Config) { c.Count = 0 }, "count"},
		{"count too big", func(c *Config) { c.Count = MaxCount + 1 }, "count"},
		{"no duration", func(c *Config) { c.Duration = 0 }, "duration"},
		{"duration too long", func(c *Config) { c.Duration = MaxDuration + 1 }, "duration"},
		{"family", func(c *Config) { c.Family = "ipx" }, "family"},
		{"sources", func(c *Config) { c.Sources = MaxSources + 1 }, "sources"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := Run(ctx, c); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run = %v; want an error about %s", err, tt.want)
			}
		})
	}
}

// Run stops at its count, or at its duration, whichever comes first; it
// never sends faster than its rate allows (one SYN at time zero, then
// rate·elapsed). The port is closed, so each SYN only draws an RST.
func TestRunBounded(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		// byCount: the count ends the run, not the duration.
		byCount bool
	}{
		{"count ends it", Config{Rate: 1_000_000, Count: 500, Duration: time.Minute}, true},
		{"duration ends it", Config{Rate: 1_000, Count: MaxCount, Duration: 200 * time.Millisecond, Family: IPv4}, false},
		{"ipv6 only", Config{Rate: 1_000_000, Count: 300, Duration: time.Minute, Family: IPv6}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			tt.cfg.Port = testutil.ClosedPort(t)
			r, err := Run(ctx, tt.cfg)
			if errors.Is(err, os.ErrPermission) {
				t.Skipf("SKIPPED, NOT RUN: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", r)
			if r.Errors != 0 || r.V4+r.V6 != r.Sent {
				t.Errorf("errors %d (%s), v4 %d + v6 %d ≠ sent %d", r.Errors, r.FirstError, r.V4, r.V6, r.Sent)
			}
			if tt.byCount && r.Sent != uint64(tt.cfg.Count) {
				t.Errorf("sent %d; want the count, %d", r.Sent, tt.cfg.Count)
			}
			if !tt.byCount && (r.Sent == 0 || r.Sent >= uint64(tt.cfg.Count)) {
				t.Errorf("sent %d; want some, fewer than the count", r.Sent)
			}
			if limit := uint64(r.Elapsed.Seconds()*float64(tt.cfg.Rate)) + 1; r.Sent > limit {
				t.Errorf("sent %d in %v: above the rate's %d", r.Sent, r.Elapsed, limit)
			}
			switch tt.cfg.Family {
			case IPv6:
				if r.V4 != 0 {
					t.Errorf("%d IPv4 SYNs with family 6", r.V4)
				}
			case IPv4:
				if r.V6 != 0 {
					t.Errorf("%d IPv6 SYNs with family 4", r.V6)
				}
			}
		})
	}
}
