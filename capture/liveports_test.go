package capture

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/internal/testutil"
)

// TestLivePorts: one capture of several ports (`audit watch`) hands over
// the SYNs to each, IPv4 and IPv6, and the RSTs that refuse them, and none
// of a port it was not given.
func TestLivePorts(t *testing.T) {
	t.Parallel()
	ports := []uint16{testutil.ClosedPort(t), testutil.ClosedPort(t), testutil.ClosedPort(t)}
	other := testutil.ClosedPort(t)
	var mu sync.Mutex
	syns := map[uint16]int{}
	rsts := map[uint16]int{}
	l := openLive(t, LiveConfig{Iface: "lo", Port: ports[0], Ports: ports[1:], Segments: func(v *attempt.SegmentView) {
		mu.Lock()
		defer mu.Unlock()
		if v.Flags&0x04 != 0 {
			rsts[v.SrcPort]++
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- l.Run(runCtx, func(s attempt.SYN) {
			mu.Lock()
			syns[s.Dst.Port()]++
			mu.Unlock()
		}, nil)
	}()
	var d net.Dialer
	for _, p := range append(slices.Clone(ports), other) {
		for _, host := range []string{"127.0.0.1", "::1"} {
			if c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, fmt.Sprint(p))); err == nil {
				c.Close()
				t.Fatalf("closed port %d accepted", p)
			}
		}
	}
	want := map[uint16]int{}
	for _, p := range ports {
		want[p] = 2
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		ok := cmp.Equal(want, syns) && cmp.Equal(want, rsts)
		mu.Unlock()
		if ok {
			break
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, syns); diff != "" {
		t.Errorf("SYNs by port (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, rsts); diff != "" {
		t.Errorf("RSTs by port (-want +got):\n%s", diff)
	}
}

func TestLivePortsBounds(t *testing.T) {
	many := make([]uint16, MaxLivePorts)
	for i := range many {
		many[i] = uint16(1000 + i)
	}
	tests := []struct {
		name string
		cfg  LiveConfig
		want string
	}{
		{"port 0 among them", LiveConfig{Iface: "lo", Port: 1, Ports: []uint16{2, 0}}, "open live capture: port 0"},
		{"too many", LiveConfig{Iface: "lo", Port: 1, Ports: many}, fmt.Sprintf("open live capture: %d ports: at most %d", MaxLivePorts+1, MaxLivePorts)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := OpenLive(tt.cfg)
			if err == nil || err.Error() != tt.want {
				t.Errorf("OpenLive: %v, want %q", err, tt.want)
			}
		})
	}
}
