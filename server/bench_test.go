package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/backoff-audit/audit/pb"
)

// BenchmarkRetryAccept measures the retry port's whole path per connection:
// a loopback dial, accept, timestamp, close, the session's bookkeeping and
// the record line, until the client sees EOF. It reports connections/s.
func BenchmarkRetryAccept(b *testing.B) {
	for _, bc := range []struct {
		name   string
		record func(b *testing.B) io.Writer
	}{
		{"no-record", func(*testing.B) io.Writer { return nil }},
		{"record-file", func(b *testing.B) io.Writer {
			f, err := os.Create(filepath.Join(b.TempDir(), "record.jsonl"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { f.Close() })
			return f
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout*10)
			defer cancel()
			cfg := Config{
				RetryAddr:   "127.0.0.1:0",
				MaxAttempts: b.N + 1,
				Logger:      slog.New(slog.DiscardHandler),
			}
			if w := bc.record(b); w != nil {
				cfg.Record = w
			}
			s, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			cc, err := grpc.NewClient(s.ControlAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			rpc := pb.NewReconnectServiceClient(cc)
			if _, err := rpc.Start(ctx, &pb.ReconnectParams{}); err != nil {
				b.Fatal(err)
			}
			target := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.RetryPort()))
			var d net.Dialer
			buf := make([]byte, 1)
			b.ResetTimer()
			for range b.N {
				c, err := d.DialContext(ctx, "tcp", target)
				if err != nil {
					b.Fatal(err)
				}
				c.Read(buf) // returns at the server's close
				c.Close()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "conns/s")
			if _, err := rpc.Stop(ctx, &pb.Empty{}); err != nil {
				b.Fatal(err)
			}
		})
	}
}
