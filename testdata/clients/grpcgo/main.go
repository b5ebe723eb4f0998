// Command grpcgo is a grpc-go client of the retry port whose connections
// come from a chosen local address. `audit client` runs the interop steps
// and dials from wherever the kernel picks, which on Linux is 127.0.0.1
// for every 127.0.0.0/8 target; a capture with several grpc-go clients on
// one host needs each from its own address, or they merge into one peer
// (docs/spec.md §5.3). testdata/make-compound-capture.sh runs it.
//
// It keeps one wait-for-ready RPC on a TLS channel to the retry port for
// --duration, with grpc-go's default backoff (docs/spec.md §1.1, §4.3), and
// exits 0 when the RPC ends at its deadline as it should.
//
//	go run ./testdata/clients/grpcgo --local_address=127.0.0.30 --server_retry_port=PORT --duration=45s
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/backoff-audit/audit/pb"
)

func main() {
	host := flag.String("server_host", "127.0.0.1", "the retry port's host")
	port := flag.Int("server_retry_port", 0, "the retry port")
	local := flag.String("local_address", "", "the source address of every connection (empty: the kernel's choice)")
	duration := flag.Duration("duration", 45*time.Second, "how long the wait-for-ready RPC waits")
	flag.Parse()
	if err := run(*host, *port, *local, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "grpcgo:", err)
		os.Exit(1)
	}
}

func run(host string, port int, local string, duration time.Duration) error {
	if port <= 0 {
		return fmt.Errorf("--server_retry_port %d: required", port)
	}
	d := net.Dialer{}
	if local != "" {
		a, err := netip.ParseAddr(local)
		if err != nil {
			return fmt.Errorf("--local_address: %w", err)
		}
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(a, 0))
	}
	// The retry port closes every connection before the handshake; an
	// empty root pool keeps grpc-go from reading the system's.
	creds := credentials.NewTLS(&tls.Config{ServerName: "foo.test.google.fr", RootCAs: x509.NewCertPool()})
	conn, err := grpc.NewClient(net.JoinHostPort(host, strconv.Itoa(port)),
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: 20 * time.Second}),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		return fmt.Errorf("new client: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	err = conn.Invoke(ctx, "/grpc.testing.ReconnectService/Start", &pb.ReconnectParams{}, &pb.Empty{}, grpc.WaitForReady(true))
	if status.Code(err) != codes.DeadlineExceeded {
		return fmt.Errorf("retry RPC ended with %v, want it to wait until its deadline", err)
	}
	return nil
}
