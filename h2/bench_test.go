package h2_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/backoff-audit/audit/h2"
)

// benchStream is a recording of one server-streaming RPC between a grpc-go
// client and server that carries benchBytes of messages: made once, shared
// by the benchmarks.
var benchStream = sync.OnceValues(func() (recordedConn, error) {
	const msgSize = 64 << 10
	const msgs = benchBytes / msgSize
	payload := &wrapperspb.BytesValue{Value: make([]byte, msgSize)}
	desc := grpc.ServiceDesc{
		ServiceName: "bench.Stream",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName:    "Pull",
			ServerStreams: true,
			Handler: func(_ any, ss grpc.ServerStream) error {
				var req wrapperspb.Int64Value
				if err := ss.RecvMsg(&req); err != nil {
					return err
				}
				for range req.Value {
					if err := ss.SendMsg(payload); err != nil {
						return err
					}
				}
				return nil
			},
		}},
	}
	return record(func(ctx context.Context, cc *grpc.ClientConn) error {
		s, err := cc.NewStream(ctx, &desc.Streams[0], "/bench.Stream/Pull")
		if err != nil {
			return err
		}
		if err := s.SendMsg(wrapperspb.Int64(msgs)); err != nil {
			return err
		}
		if err := s.CloseSend(); err != nil {
			return err
		}
		for {
			var m wrapperspb.BytesValue
			if err := s.RecvMsg(&m); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return err
			}
		}
	}, &desc)
})

// record runs fn with a grpc-go client of a grpc-go server of desc on
// loopback, and returns the recording of the client's one connection.
func record(fn func(context.Context, *grpc.ClientConn) error, desc *grpc.ServiceDesc) (recordedConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return recordedConn{}, err
	}
	s := grpc.NewServer()
	s.RegisterService(desc, struct{}{})
	var wg sync.WaitGroup
	wg.Go(func() { s.Serve(ln) })
	defer func() {
		s.Stop()
		wg.Wait()
	}()
	var r recorder
	cc, err := grpc.NewClient("passthrough:///"+ln.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(r.dial))
	if err != nil {
		return recordedConn{}, err
	}
	err = fn(ctx, cc)
	cc.Close()
	if err != nil {
		return recordedConn{}, err
	}
	rec, err := r.wait(ctx)
	if err != nil {
		return recordedConn{}, err
	}
	if len(rec) != 1 {
		return recordedConn{}, fmt.Errorf("%d connections recorded, want 1", len(rec))
	}
	return rec[0], nil
}

// benchBytes is the size of the messages of the benchmark's stream.
const benchBytes = 100 << 20

// BenchmarkDecode decodes the recording of a 100 MiB server-streaming RPC
// (grpc-go to grpc-go, h2c): as recorded (the client's reads, up to 32 KiB
// each), and cut into 1448-byte segments as TCP over Ethernet would carry
// it. MB/s is of the connection's bytes, both directions.
func BenchmarkDecode(b *testing.B) {
	rc, err := benchStream()
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, ch := range rc.Chunks {
		total += int64(len(ch.B))
	}
	for _, bb := range []struct {
		name string
		seg  int
	}{{"reads", 0}, {"segments1448", 1448}} {
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(total)
			b.ReportAllocs()
			for b.Loop() {
				c := h2.NewConn(rc.Client, rc.Server, h2.Options{Start: rc.Start})
				for _, ch := range rc.Chunks {
					p := ch.B
					for bb.seg > 0 && len(p) > bb.seg {
						c.Feed(ch.Dir, ch.T, p[:bb.seg])
						p = p[bb.seg:]
					}
					c.Feed(ch.Dir, ch.T, p)
				}
				c.End(rc.End)
				if r := c.Report(); len(r.Streams) != 1 || r.Streams[0].ResponseMessages != benchBytes/(64<<10) || len(r.Warnings) != 0 {
					b.Fatalf("decoded %+v, warnings %+v; want one stream of %d messages", r.Streams, r.Warnings, benchBytes/(64<<10))
				}
			}
		})
	}
}
