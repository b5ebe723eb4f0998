package h2_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/server"
)

// testTimeout bounds every wait of these tests.
const testTimeout = 20 * time.Second

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// fakeReconnect is a minimal ReconnectService: Start succeeds, Stop
// answers info, or fails with stopErr.
type fakeReconnect struct {
	pb.UnimplementedReconnectServiceServer
	info    *pb.ReconnectInfo
	stopErr error
}

func (f fakeReconnect) Start(context.Context, *pb.ReconnectParams) (*pb.Empty, error) {
	return &pb.Empty{}, nil
}

func (f fakeReconnect) Stop(context.Context, *pb.Empty) (*pb.ReconnectInfo, error) {
	if f.stopErr != nil {
		return nil, f.stopErr
	}
	return f.info, nil
}

// serveGRPC runs a grpc-go server with svc on loopback until the test
// ends and returns its address.
func serveGRPC(t *testing.T, svc pb.ReconnectServiceServer, opts ...grpc.ServerOption) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	pb.RegisterReconnectServiceServer(s, svc)
	var wg sync.WaitGroup
	wg.Go(func() { s.Serve(ln) })
	t.Cleanup(func() {
		s.Stop()
		wg.Wait()
	})
	return ln.Addr().String()
}

// dialRecorded is a grpc-go client of addr whose connections rec records.
func dialRecorded(t *testing.T, addr string, rec *recorder, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(rec.dial),
	}, opts...)
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// wantClean fails the test when a report of a real stack's connection has
// a warning, damage or no SETTINGS exchange.
func wantClean(t *testing.T, i int, r *h2.Report) {
	t.Helper()
	if r.Damaged != "" || r.Encrypted || len(r.Warnings) > 0 {
		t.Errorf("connection %d: damaged %q, encrypted %v, warnings %+v; want a clean decode", i, r.Damaged, r.Encrypted, r.Warnings)
	}
	var kinds []string
	for _, e := range r.Events {
		kinds = append(kinds, e.Dir.String()+" "+string(e.Kind))
	}
	for _, want := range []string{"client_to_server settings", "server_to_client settings", "client_to_server settings_ack", "server_to_client settings_ack"} {
		if !strings.Contains(strings.Join(kinds, "\n"), want) {
			t.Errorf("connection %d: events %q lack %q", i, kinds, want)
		}
	}
	// Each side's first frame is its SETTINGS (RFC 9113 §3.4); a grpc-go
	// server sends its own without waiting for the client's preface.
	var first [2]*h2.Event
	for k := range r.Events {
		if e := &r.Events[k]; first[e.Dir] == nil {
			first[e.Dir] = e
		}
	}
	for d, e := range first {
		if e == nil || e.Kind != h2.KindSettings {
			t.Errorf("connection %d: first event from %s %+v, want SETTINGS", i, h2.Direction(d), e)
		}
	}
}

// logFindings logs the diagnoses, for go test -v.
func logFindings(t *testing.T, reports []*h2.Report, opts h2.DiagnoseOptions) {
	t.Helper()
	for _, f := range h2.Diagnose(reports, opts) {
		t.Logf("%s [%d]: %s", f.Kind, f.Conn, f.Text)
	}
}

// wantSameWhenSplit feeds the recording again cut at random points and
// wants the same reports: TCP may cut the streams anywhere.
func wantSameWhenSplit(t *testing.T, rec recording, want []*h2.Report) {
	t.Helper()
	for seed := range uint64(3) {
		got := rec.decodeSplit(rand.New(rand.NewPCG(seed, 1)))
		if d := cmp.Diff(want, got, cmpopts.EquateComparable(netip.AddrPort{})); d != "" {
			t.Errorf("split with seed %d: reports differ (-whole +split):\n%s", seed, d)
		}
	}
}

// TestReconnectStartStop records a grpc-go client calling Start and Stop on
// the project's server (package server), plain and with gzip, and wants
// the decoded calls to be what the client sent and received.
func TestReconnectStartStop(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []grpc.DialOption
		enc  string
	}{
		{name: "identity"},
		{name: "gzip", opts: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.UseCompressor(gzip.Name))}, enc: "gzip"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec, info, start, stop := recordStartStop(t, tt.opts...)
			reports := rec.decode()
			if len(reports) != 1 {
				t.Fatalf("%d connections recorded, want 1", len(reports))
			}
			r := reports[0]
			wantClean(t, 0, r)
			if len(r.Streams) != 2 {
				t.Fatalf("streams %+v, want Start and Stop", r.Streams)
			}
			st, sp := r.Streams[0], r.Streams[1]
			if st.Start.Before(start) || sp.End.After(stop) {
				t.Errorf("Start began %v, Stop ended %v: outside the calls' %v – %v", st.Start, sp.End, start, stop)
			}
			for _, w := range []struct {
				s      h2.Stream
				method string
			}{{st, pb.ReconnectService_Start_FullMethodName}, {sp, pb.ReconnectService_Stop_FullMethodName}} {
				s := w.s
				if s.Method != w.method || s.GRPCStatus != "OK" || s.HTTPStatus != 200 || s.State != h2.StateClosed ||
					s.RequestMessages != 1 || s.ResponseMessages != 1 || s.RequestEncoding != tt.enc || s.ResponseEncoding != tt.enc {
					t.Errorf("stream %+v: want %s, OK, 200, closed, one message each way, encoding %q", s, w.method, tt.enc)
				}
				if s.Timeout == "" || s.Authority == "" || s.PreviousAttempts != 0 {
					t.Errorf("stream %d: grpc-timeout %q, :authority %q, previous attempts %d; want a timeout (the call had a deadline), an authority, 0", s.ID, s.Timeout, s.Authority, s.PreviousAttempts)
				}
				if s.Start.Before(r.Start) || s.End.Before(s.Start) || s.End.After(r.End) {
					t.Errorf("stream %d: start %v end %v, outside the connection's %v – %v", s.ID, s.Start, s.End, r.Start, r.End)
				}
			}
			if d := cmp.Diff(&h2.ReconnectParams{MaxReconnectBackoffMs: 2000}, st.ReconnectParams); d != "" {
				t.Errorf("Start's params (-want +got):\n%s", d)
			}
			if d := cmp.Diff(&h2.ReconnectInfo{Passed: info.GetPassed(), BackoffMs: info.GetBackoffMs()}, sp.ReconnectInfo); d != "" {
				t.Errorf("Stop's answer (-client's +decoded):\n%s", d)
			}
			if len(sp.ReconnectInfo.BackoffMs) != 1 {
				t.Errorf("Stop's backoff_ms %v: want the one interval of the two connections made to the retry port", sp.ReconnectInfo.BackoffMs)
			}
			logFindings(t, reports, h2.DiagnoseOptions{})
			wantSameWhenSplit(t, rec, reports)
		})
	}
}

// recordStartStop runs the interop steps in short on server.New: Start
// with max_reconnect_backoff_ms 2000, two connections to the retry port,
// Stop. It returns the recording of the control connection and Stop's
// answer as the client got it.
func recordStartStop(t *testing.T, opts ...grpc.DialOption) (rec recording, info *pb.ReconnectInfo, start, stop time.Time) {
	t.Helper()
	ctx := testContext(t)
	srv, err := server.New(server.Config{
		ControlAddr: "127.0.0.1:0",
		RetryAddr:   "127.0.0.1:0",
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	var r recorder
	cc := dialRecorded(t, srv.ControlAddr(), &r, opts...)
	client := pb.NewReconnectServiceClient(cc)
	start = time.Now()
	if _, err := client.Start(ctx, &pb.ReconnectParams{MaxReconnectBackoffMs: 2000}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		c, err := net.Dial("tcp", srv.RetryAddr())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	info, err = client.Stop(ctx, &pb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	stop = time.Now()
	cc.Close()
	return r.take(t, ctx), info, start, stop
}

// grpcFrame is msg as one gRPC message, uncompressed.
func grpcFrame(t *testing.T, msg proto.Message) []byte {
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 5, 5+len(b))
	binary.BigEndian.PutUint32(out[1:], uint32(len(b)))
	return append(out, b...)
}

// TestKeepaliveTooManyPings records Go's own HTTP/2 client (net/http,
// h2c) making one gRPC call to a grpc-go server that enforces a 60 s
// minimum ping interval, then pinging its idle connection every 100 ms: the
// server answers GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and closes.
// (grpc-go's own client will not ping more often than every 10 s.)
func TestKeepaliveTooManyPings(t *testing.T) {
	rec := recordTooManyPings(t)
	reports := rec.decode()
	if len(reports) != 1 {
		t.Fatalf("%d connections recorded, want 1", len(reports))
	}
	r := reports[0]
	wantClean(t, 0, r)
	if len(r.Streams) != 1 || r.Streams[0].Method != pb.ReconnectService_Start_FullMethodName || r.Streams[0].GRPCStatus != "OK" ||
		r.Streams[0].ReconnectParams == nil || r.Streams[0].ReconnectParams.MaxReconnectBackoffMs != 100 {
		t.Errorf("streams %+v, want the one Start call, OK, max_reconnect_backoff_ms 100", r.Streams)
	}
	k, ok := h2.TooManyPings(r)
	if !ok {
		t.Fatalf("no GOAWAY ENHANCE_YOUR_CALM among %+v", r.Events)
	}
	// grpc-go's server forgives the first ping after it wrote to the
	// connection, and sends GOAWAY at the third strike
	// (internal/transport/http2_server.go, maxPingStrikes = 2).
	if k.Debug != "too_many_pings" || k.Pings.Count != 4 {
		t.Errorf("keepalive %+v: want debug too_many_pings after 4 client PINGs", k)
	}
	if k.Pings.Min < 100*time.Millisecond || k.Pings.Median > time.Second {
		t.Errorf("client PINGs at least %v apart, median %v; want every 100 ms or a little more", k.Pings.Min, k.Pings.Median)
	}
	var text string
	for _, f := range h2.Diagnose(reports, h2.DiagnoseOptions{}) {
		if f.Kind == h2.FindingTooManyPings {
			text = f.Text
		}
	}
	if !regexp.MustCompile(`^keepalive pings every 1\d\d ms; the server answered GOAWAY ENHANCE_YOUR_CALM too_many_pings after 4$`).MatchString(text) {
		t.Errorf("finding %q, want keepalive pings every ~100 ms; … after 4", text)
	}
	acks := 0
	for _, e := range r.Events {
		if e.Kind == h2.KindPingAck && e.Dir == h2.ServerToClient {
			acks++
		}
	}
	logFindings(t, reports, h2.DiagnoseOptions{})
	if acks < 3 {
		t.Errorf("%d PING ACKs from the server, want one for each PING before the GOAWAY's", acks)
	}
	wantSameWhenSplit(t, rec, reports)
}

func recordTooManyPings(t *testing.T) recording {
	t.Helper()
	ctx := testContext(t)
	addr := serveGRPC(t, fakeReconnect{}, grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 60 * time.Second}))
	var r recorder
	protos := new(http.Protocols)
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{
		Protocols: protos,
		HTTP2:     &http.HTTP2Config{SendPingTimeout: 100 * time.Millisecond, PingTimeout: 5 * time.Second},
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return r.dial(ctx, addr)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+pb.ReconnectService_Start_FullMethodName,
		bytes.NewReader(grpcFrame(t, &pb.ReconnectParams{MaxReconnectBackoffMs: 100})))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.Trailer.Get("Grpc-Status") != "0" {
		t.Fatalf("response %s, grpc-status %q; want HTTP/2 and 0", resp.Proto, resp.Trailer.Get("Grpc-Status"))
	}
	// The connection idles; the client's pings end it.
	return r.take(t, ctx)
}

// TestMaxConnectionAge records a grpc-go client calling every 50 ms a
// grpc-go server whose connections live 300 ms (MaxConnectionAge): the
// server drains each with GOAWAY NO_ERROR "max_age" and the client opens a
// new connection.
func TestMaxConnectionAge(t *testing.T) {
	ctx := testContext(t)
	const age = 300 * time.Millisecond
	addr := serveGRPC(t, fakeReconnect{}, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: age, MaxConnectionAgeGrace: 5 * time.Second}))
	var rr recorder
	cc := dialRecorded(t, addr, &rr)
	client := pb.NewReconnectServiceClient(cc)
	ok := 0
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if _, err := client.Start(ctx, &pb.ReconnectParams{}); err == nil {
			ok++
		}
	}
	cc.Close()
	rec := rr.take(t, ctx)
	reports := rec.decode()
	if len(reports) < 2 {
		t.Fatalf("%d connections, want a new one after each GOAWAY", len(reports))
	}
	answered := 0
	for i, r := range reports {
		wantClean(t, i, r)
		for _, s := range r.Streams {
			if s.GRPCStatus == "OK" {
				answered++
			}
		}
	}
	if answered != ok {
		t.Errorf("%d calls answered OK on the wire, the client counted %d", answered, ok)
	}
	g := h2.GoAways(reports[0])
	if len(g) == 0 {
		t.Fatalf("no GOAWAY on the first connection: %+v", reports[0].Events)
	}
	// grpc-go jitters MaxConnectionAge by ±10 %; the timer fires no sooner.
	if first := g[0]; first.Dir != h2.ServerToClient || first.GoAway.Code != "NO_ERROR" || first.GoAway.Debug != "max_age" ||
		first.Age < age*9/10 || first.Age > age*11/10+200*time.Millisecond {
		t.Errorf("first GOAWAY %+v at age %v: want the server's NO_ERROR max_age at 270–530 ms", first.GoAway, first.Age)
	}
	// A draining grpc-go server first says 2^31-1, then the last stream it
	// took; no stream above that one was answered.
	last := g[len(g)-1].GoAway.LastStreamID
	for _, s := range reports[0].Streams {
		if s.ID > last && s.GRPCStatus != "" {
			t.Errorf("stream %d answered above the last GOAWAY's last stream id %d", s.ID, last)
		}
	}
	rcs := h2.Reconnects(h2.Digests(reports))
	if len(rcs) == 0 || rcs[0].From != 0 || rcs[0].To != 1 || rcs[0].Delay < 0 || rcs[0].Delay > time.Second {
		t.Errorf("reconnects %+v: want connection 0's GOAWAY followed by connection 1 within 1 s", rcs)
	}
	var text string
	for _, f := range h2.Diagnose(reports, h2.DiagnoseOptions{}) {
		if f.Kind == h2.FindingGoAwayAge && f.Conn == 0 {
			text = f.Text
			break
		}
	}
	logFindings(t, reports, h2.DiagnoseOptions{})
	if !regexp.MustCompile(`^the server's GOAWAY NO_ERROR \(max_age\) at connection age ≈ \d+ ms, last stream id 2147483647, `).MatchString(text) {
		t.Errorf("finding %q, want the server's first GOAWAY at connection age ≈ … ms", text)
	}
	wantSameWhenSplit(t, rec, reports)
}

// TestRetryPolicy records a grpc-go client with a retry policy in its
// service config calling Stop on a server that answers UNAVAILABLE: the
// attempts carry grpc-previous-rpc-attempts, and their delays follow A6.
func TestRetryPolicy(t *testing.T) {
	ctx := testContext(t)
	const msg = "try again (100% unavailable)"
	addr := serveGRPC(t, fakeReconnect{stopErr: status.Error(codes.Unavailable, msg)})
	policy := h2.RetryPolicy{MaxAttempts: 4, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 150 * time.Millisecond, BackoffMultiplier: 2}
	var rr recorder
	cc := dialRecorded(t, addr, &rr, grpc.WithDefaultServiceConfig(`{"methodConfig": [{
		"name": [{"service": "grpc.testing.ReconnectService", "method": "Stop"}],
		"retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.05s", "maxBackoff": "0.15s",
			"backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`))
	_, err := pb.NewReconnectServiceClient(cc).Stop(ctx, &pb.Empty{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Stop: %v, want UNAVAILABLE", err)
	}
	cc.Close()
	rec := rr.take(t, ctx)
	reports := rec.decode()
	if len(reports) != 1 {
		t.Fatalf("%d connections, want 1", len(reports))
	}
	wantClean(t, 0, reports[0])
	var prev []int
	for _, s := range reports[0].Streams {
		prev = append(prev, s.PreviousAttempts)
		if s.GRPCStatus != "UNAVAILABLE" || s.GRPCMessage != msg || s.Method != pb.ReconnectService_Stop_FullMethodName {
			t.Errorf("stream %d: %s %q %q, want Stop, UNAVAILABLE, %q", s.ID, s.Method, s.GRPCStatus, s.GRPCMessage, msg)
		}
	}
	if d := cmp.Diff([]int{0, 1, 2, 3}, prev); d != "" {
		t.Errorf("grpc-previous-rpc-attempts (-want +got):\n%s", d)
	}
	chains := h2.RetryChains(h2.Digests(reports))
	if len(chains) != 1 || len(chains[0].Attempts) != 4 || chains[0].Missing {
		t.Fatalf("chains %+v, want one of 4 attempts", chains)
	}
	chk := h2.CheckRetries(chains[0], policy, 50*time.Millisecond)
	for i, d := range chk.Delays {
		// The delay is measured from the trailers' arrival, before the
		// client's timer starts, so it is never shorter than the timer's
		// 0.8·b: no tolerance is needed on this side.
		if wantB := []time.Duration{50, 100, 150}[i] * time.Millisecond; d.Backoff != wantB || d.Delay < wantB*8/10 || !d.InJittered {
			t.Errorf("delay before attempt %d: %+v; want b %v and a delay within [0.8·b, 1.2·b] (grpc-go's jitter)", d.Attempt, d, wantB)
		}
	}
	if len(chk.TooMany) != 0 || !chk.WithinJittered() {
		t.Errorf("check %+v: want no attempt beyond 4, every delay within the revised window", chk)
	}
	policy.MaxAttempts = 3
	if got := h2.CheckRetries(chains[0], policy, 50*time.Millisecond).TooMany; !cmp.Equal(got, []int{4}) {
		t.Errorf("with maxAttempts 3, attempts beyond it: %v, want [4]", got)
	}
	logFindings(t, reports, h2.DiagnoseOptions{Retry: &policy, Tolerance: 50 * time.Millisecond})
	fs := h2.Diagnose(reports, h2.DiagnoseOptions{Retry: &policy, Tolerance: 50 * time.Millisecond})
	var texts []string
	for _, f := range fs {
		if f.Kind == h2.FindingRetry || f.Kind == h2.FindingRetryAttempts {
			texts = append(texts, f.Text)
		}
	}
	if len(texts) != 2 || !strings.HasPrefix(texts[0], "/grpc.testing.ReconnectService/Stop from 127.0.0.1: 4 attempts (UNAVAILABLE, UNAVAILABLE, UNAVAILABLE, UNAVAILABLE), delays ") ||
		texts[1] != "/grpc.testing.ReconnectService/Stop: attempt 4 beyond maxAttempts 3" {
		t.Errorf("retry findings %q", texts)
	}
	wantSameWhenSplit(t, rec, reports)
}
