package loadgen

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestLoopbackOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lo := netip.MustParseAddrPort("127.0.0.1:9")
	for _, cfg := range []Config{
		{Target: netip.MustParseAddrPort("192.0.2.1:443"), Conns: 1},
		{Target: netip.MustParseAddrPort("[2001:db8::1]:443"), Conns: 1},
		{Target: netip.AddrPort{}, Conns: 1},
		{Target: lo, Sources: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, Conns: 1},
	} {
		if _, err := Run(ctx, cfg); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
			t.Errorf("Run(%+v): %v, want a refusal", cfg, err)
		}
		if _, err := Open(ctx, cfg); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
			t.Errorf("Open(%+v): %v, want a refusal", cfg, err)
		}
	}
}

func TestPercentile(t *testing.T) {
	ds := make([]time.Duration, 1000)
	for i := range ds {
		ds[i] = time.Duration(1000 - i) // reversed: Percentile sorts
	}
	for _, tt := range []struct {
		p    float64
		want time.Duration
	}{{50, 500}, {99, 990}, {100, 1000}, {0.01, 1}} {
		if got := Percentile(ds, tt.p); got != tt.want {
			t.Errorf("p%v = %v, want %v", tt.p, got, tt.want)
		}
	}
	if got := Percentile(nil, 99); got != 0 {
		t.Errorf("p99 of nothing = %v", got)
	}
}
