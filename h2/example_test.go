package h2_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/net/http2"

	"github.com/backoff-audit/audit/h2"
)

// A client pings every 10 s a server that allows fewer pings: fed the
// connection's frames as a capture holds them, h2 says so.
func ExampleDiagnose() {
	t0 := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	c := h2.NewConn(netip.MustParseAddrPort("10.0.0.2:40000"), netip.MustParseAddrPort("10.0.0.1:50051"), h2.Options{Start: t0})
	frame := func(dir h2.Direction, t time.Time, write func(*http2.Framer) error) {
		var b bytes.Buffer
		if err := write(http2.NewFramer(&b, nil)); err != nil {
			panic(err)
		}
		c.Feed(dir, t, b.Bytes())
	}
	c.Feed(h2.ClientToServer, t0, []byte(http2.ClientPreface))
	frame(h2.ClientToServer, t0, func(fr *http2.Framer) error { return fr.WriteSettings() })
	frame(h2.ServerToClient, t0, func(fr *http2.Framer) error {
		return fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 100})
	})
	for i := range 3 {
		t := t0.Add(time.Duration(i+1) * 10 * time.Second)
		frame(h2.ClientToServer, t, func(fr *http2.Framer) error { return fr.WritePing(false, [8]byte{byte(i)}) })
		frame(h2.ServerToClient, t, func(fr *http2.Framer) error { return fr.WritePing(true, [8]byte{byte(i)}) })
	}
	end := t0.Add(30*time.Second + 5*time.Millisecond)
	frame(h2.ServerToClient, end, func(fr *http2.Framer) error {
		return fr.WriteGoAway(0, http2.ErrCodeEnhanceYourCalm, []byte("too_many_pings"))
	})
	c.End(end)

	for _, f := range h2.Diagnose([]*h2.Report{c.Report()}, h2.DiagnoseOptions{}) {
		fmt.Println(f.Kind+":", f.Text)
	}
	// Output:
	// ping_cadence: client PINGs: 3, every 10 s (median), at least 10 s apart
	// too_many_pings: keepalive pings every 10 s; the server answered GOAWAY ENHANCE_YOUR_CALM too_many_pings after 3
	// goaway_age: the server's GOAWAY ENHANCE_YOUR_CALM (too_many_pings) at connection age ≈ 30 s, last stream id 0, 0 streams in flight
	// reconnect: after the server's GOAWAY ENHANCE_YOUR_CALM on connection 0, the client opened no new connection
}
