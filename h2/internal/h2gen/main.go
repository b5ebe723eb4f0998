// Command h2gen records the HTTP/2 capture fixtures of testdata/h2: real
// grpc-go clients and servers talking on loopback while tcpdump writes
// every segment of their connections, whole, to a pcap file
// (testdata/README.md, "HTTP/2 captures"). Each run makes new ports,
// times and bytes; the fixtures are samples of real stacks, and their
// golden reports are rewritten with them.
//
// It needs root (tcpdump captures on lo) and takes about a minute:
//
//	go run ./h2/internal/h2gen -out testdata/h2
//
// -only NAME remakes one fixture.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/backoff-audit/audit/pb"
)

// fixture is one capture: run drives real stacks against a server it
// starts on a loopback port, which it hands to listen first so that the
// capture is running before the first SYN.
type fixture struct {
	name string
	run  func(ctx context.Context, listen func(net.Listener) error) error
}

var fixtures = []fixture{
	{"keepalive-too-many-pings", runTooManyPings},
	{"retry-unavailable", runRetries},
}

func main() {
	out := flag.String("out", filepath.Join("testdata", "h2"), "folder the captures are written to")
	only := flag.String("only", "", "remake only the fixture of this name")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("h2gen: ")
	if os.Geteuid() != 0 {
		log.Fatal("run as root: tcpdump must capture on lo")
	}
	if _, err := exec.LookPath("tcpdump"); err != nil {
		log.Fatal("tcpdump not found (apt-get install -y tcpdump)")
	}
	done := 0
	for _, f := range fixtures {
		if *only != "" && f.name != *only {
			continue
		}
		path := filepath.Join(*out, f.name+".pcap")
		start := time.Now()
		if err := record(path, f); err != nil {
			log.Fatalf("%s: %v", f.name, err)
		}
		st, err := os.Stat(path)
		if err != nil {
			log.Fatal(err)
		}
		log.Printf("wrote %s (%d bytes) in %s", path, st.Size(), time.Since(start).Round(100*time.Millisecond))
		done++
	}
	if done == 0 {
		log.Fatalf("no fixture named %q", *only)
	}
}

// record runs f under tcpdump and writes the capture to path.
func record(path string, f fixture) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "h2gen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, f.name+".pcap")
	var dump *tcpdump
	err = f.run(ctx, func(ln net.Listener) error {
		// Both ends on 127.0.0.1: the port alone would also pass other
		// traffic of the machine that happens to use it.
		filter := fmt.Sprintf("src host 127.0.0.1 and dst host 127.0.0.1 and tcp port %d", ln.Addr().(*net.TCPAddr).Port)
		dump, err = startTcpdump(ctx, tmp, filter)
		return err
	})
	if dump != nil {
		// Let the last segments (FIN, ACK) reach the file.
		time.Sleep(time.Second)
		if serr := dump.stop(); err == nil {
			err = serr
		}
	}
	if err != nil {
		return err
	}
	b, err := os.ReadFile(tmp)
	if err != nil {
		return err
	}
	// Written anew rather than moved: tcpdump's file belongs to the user
	// it drops its privileges to.
	return os.WriteFile(path, b, 0o644)
}

// tcpdump is a running tcpdump process.
type tcpdump struct {
	cmd    *exec.Cmd
	stderr strings.Builder
	wg     sync.WaitGroup
}

// startTcpdump captures filter on lo into path, whole segments with
// nanosecond timestamps, each packet read and written as it comes
// (without --immediate-mode, the packets of the last block the kernel had
// not handed over yet were lost when tcpdump was stopped), and returns
// once tcpdump says it is listening.
func startTcpdump(ctx context.Context, path, filter string) (*tcpdump, error) {
	d := &tcpdump{cmd: exec.CommandContext(ctx, "tcpdump", "-i", "lo", "-nn", "-U", "--immediate-mode", "-s", "0", "-B", "65536",
		"--time-stamp-precision=nano", "-w", path, filter)}
	errPipe, err := d.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	// In immediate mode each packet takes a frame of the kernel's ring as
	// large as the snap length, 256 KiB, and on lo each packet comes
	// twice (sent and received): tcpdump's default 2 MiB ring held 4
	// packets and lost some of a connection's first burst. 64 MiB (-B,
	// in KiB) holds 128.
	d.cmd.Cancel = func() error { return d.cmd.Process.Signal(syscall.SIGINT) }
	d.cmd.WaitDelay = 5 * time.Second
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start tcpdump: %w", err)
	}
	listening := make(chan struct{})
	d.wg.Go(func() {
		sc := bufio.NewScanner(errPipe)
		once := sync.OnceFunc(func() { close(listening) })
		for sc.Scan() {
			d.stderr.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "listening on") {
				once()
			}
		}
		io.Copy(io.Discard, errPipe)
	})
	select {
	case <-listening:
		return d, nil
	case <-time.After(10 * time.Second):
		d.stop()
		return nil, fmt.Errorf("tcpdump did not start listening:\n%s", d.stderr.String())
	}
}

// stop interrupts tcpdump, which then writes what it holds and exits.
func (d *tcpdump) stop() error {
	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop tcpdump: %w", err)
	}
	d.wg.Wait()
	if err := d.cmd.Wait(); err != nil {
		return fmt.Errorf("tcpdump: %w\n%s", err, d.stderr.String())
	}
	if !strings.Contains("\n"+d.stderr.String(), "\n0 packets dropped by kernel") {
		return fmt.Errorf("tcpdump lost packets:\n%s", d.stderr.String())
	}
	return nil
}

// serve runs a grpc-go server with svc on a loopback port, tells listen
// its listener before serving, and returns a func that stops it.
func serve(listen func(net.Listener) error, svc pb.ReconnectServiceServer, opts ...grpc.ServerOption) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	if err := listen(ln); err != nil {
		ln.Close()
		return "", nil, err
	}
	s := grpc.NewServer(opts...)
	pb.RegisterReconnectServiceServer(s, svc)
	var wg sync.WaitGroup
	wg.Go(func() { s.Serve(ln) })
	return ln.Addr().String(), func() { s.Stop(); wg.Wait() }, nil
}

// okService answers Start.
type okService struct {
	pb.UnimplementedReconnectServiceServer
}

func (okService) Start(context.Context, *pb.ReconnectParams) (*pb.Empty, error) {
	return &pb.Empty{}, nil
}

// runTooManyPings: a grpc-go server that enforces a 60 s minimum ping
// interval (keepalive.EnforcementPolicy.MinTime), and a grpc-go client
// that pings every 10 s, the least grpc-go allows, even without a call
// (PermitWithoutStream). The client makes one call, then idles: each of
// its pings is a strike, and after its third the server answers GOAWAY
// ENHANCE_YOUR_CALM "too_many_pings" and closes. The client's next call
// opens a new connection.
//
// The connection idles rather than calling on: every response the server
// writes forgives the next ping, so a busy connection is never struck.
func runTooManyPings(ctx context.Context, listen func(net.Listener) error) error {
	addr, stop, err := serve(listen, okService{},
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 60 * time.Second}))
	if err != nil {
		return err
	}
	defer stop()
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}))
	if err != nil {
		return err
	}
	defer cc.Close()
	client := pb.NewReconnectServiceClient(cc)
	if _, err := client.Start(ctx, &pb.ReconnectParams{}); err != nil {
		return fmt.Errorf("first call: %w", err)
	}
	// The GOAWAY takes the channel out of READY.
	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if !cc.WaitForStateChange(waitCtx, connectivity.Ready) {
		return errors.New("the server did not close the connection within 60 s")
	}
	if _, err := client.Start(ctx, &pb.ReconnectParams{}); err != nil {
		return fmt.Errorf("call after the GOAWAY: %w", err)
	}
	return nil
}

// The retry policy the client of runRetries is given; the fixture's
// golden tests hold its delays to the same figures.
const retryServiceConfig = `{"methodConfig": [{
	"name": [{"service": "grpc.testing.ReconnectService", "method": "Start"}],
	"retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.1s", "maxBackoff": "1s",
		"backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`

// retryPlan is, for each call in turn, how many of its attempts the
// server answers UNAVAILABLE: the first call needs no retry, the last
// exhausts the policy's five attempts.
var retryPlan = []int{0, 1, 2, 3, 4, 5}

// flakyService answers Start UNAVAILABLE to the first plan[i] attempts of
// the i-th call, telling a call's attempts by grpc-previous-rpc-attempts.
// Calls come one after the other, so a first attempt starts the next call.
type flakyService struct {
	pb.UnimplementedReconnectServiceServer
	mu   sync.Mutex
	plan []int
	fail int // attempts of the current call to answer UNAVAILABLE
}

func (s *flakyService) Start(ctx context.Context, _ *pb.ReconnectParams) (*pb.Empty, error) {
	prev := 0
	if v := metadata.ValueFromIncomingContext(ctx, "grpc-previous-rpc-attempts"); len(v) > 0 {
		fmt.Sscan(v[0], &prev)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev == 0 {
		if len(s.plan) == 0 {
			return nil, status.Error(codes.FailedPrecondition, "no call planned")
		}
		s.fail, s.plan = s.plan[0], s.plan[1:]
	}
	if prev < s.fail {
		return nil, status.Errorf(codes.Unavailable, "attempt %d of %d refused", prev+1, s.fail)
	}
	return &pb.Empty{}, nil
}

// runRetries: a grpc-go client whose service config gives Start a retry
// policy (retryServiceConfig) makes the calls of retryPlan, one after the
// other, on one connection.
func runRetries(ctx context.Context, listen func(net.Listener) error) error {
	svc := &flakyService{plan: retryPlan}
	addr, stop, err := serve(listen, svc)
	if err != nil {
		return err
	}
	defer stop()
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(retryServiceConfig))
	if err != nil {
		return err
	}
	defer cc.Close()
	client := pb.NewReconnectServiceClient(cc)
	for i, n := range retryPlan {
		_, err := client.Start(ctx, &pb.ReconnectParams{})
		want := codes.OK
		if n >= 5 {
			want = codes.Unavailable
		}
		if status.Code(err) != want {
			return fmt.Errorf("call %d: %v, want %v", i, err, want)
		}
	}
	return nil
}
