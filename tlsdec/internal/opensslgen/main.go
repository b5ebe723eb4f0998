// Command opensslgen records the TLS fixtures of tlsdec/testdata that Go's
// crypto/tls cannot make: connections between `openssl s_client` and
// `openssl s_server` in the TLS 1.3 suites crypto/tls never chooses
// (AES-256-GCM, ChaCha20-Poly1305, AES-128-CCM) and with key updates, which
// crypto/tls never sends. Both talk through a proxy of this program on
// loopback that copies each side's bytes as they pass, in the order they
// pass; s_client writes the key log. Each fixture is one JSON file: the
// chunks, the key log, and the application bytes each side was given to
// send (commands such as "k", a key update, are not sent as data).
// OpenSSL logs the secrets after each key update the client made or saw
// (CLIENT_TRAFFIC_SECRET_N, SERVER_TRAFFIC_SECRET_N).
//
//	go run ./tlsdec/internal/opensslgen -out tlsdec/testdata
//
// Each run draws new keys, so the files change; the tests hold what every
// run shows. It takes about 15 s.
package main

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Fixture is one recorded connection, as the tests read it.
type Fixture struct {
	Name    string `json:"name"`
	OpenSSL string `json:"openssl"`
	// Suite is the TLS 1.3 suite both sides were limited to.
	Suite  string  `json:"suite"`
	Keylog string  `json:"keylog"`
	Chunks []Chunk `json:"chunks"`
	// ClientData and ServerData are the bytes each side was given to
	// send.
	ClientData string `json:"client_data"`
	ServerData string `json:"server_data"`
}

// Chunk is what one side wrote, as the proxy read it: Dir 0 is the
// client's, 1 the server's.
type Chunk struct {
	Dir  int    `json:"dir"`
	Data []byte `json:"data"`
}

// A case is one fixture: the suite, and the lines each side types, in
// turn (a command line is not sent as data; "" is a turn without one). A
// side asked for a key update ("K") sends its own before its next data
// (RFC 8446 §4.6.3), so the server types a line after the client's "K".
type testCase struct {
	name, suite  string
	client, serv []string
}

var cases = []testCase{
	{"openssl-tls13-aes256", "TLS_AES_256_GCM_SHA384",
		[]string{"GET / from the client\n", "second line\n"}, []string{"hello from the server\n"}},
	{"openssl-tls13-chacha20-keyupdate", "TLS_CHACHA20_POLY1305_SHA256",
		[]string{"before the update\n", "k\n", "after the client's update\n", "K\n", "after the update asked of both\n"},
		[]string{"server before\n", "k\n", "server after its update\n", "", "server after the update asked of it\n"}},
	{"openssl-tls13-ccm", "TLS_AES_128_CCM_SHA256",
		[]string{"not decrypted: CCM\n"}, []string{"nor this\n"}},
}

func main() {
	out := flag.String("out", filepath.Join("tlsdec", "testdata"), "folder the fixtures are written to")
	flag.Parse()
	log.SetFlags(0)
	tmp, err := os.MkdirTemp("", "opensslgen")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	cert, key := filepath.Join(tmp, "cert.pem"), filepath.Join(tmp, "key.pem")
	if err := writeCert(cert, key); err != nil {
		log.Fatal(err)
	}
	version, err := exec.Command("openssl", "version").Output()
	if err != nil {
		log.Fatalf("openssl version: %v", err)
	}
	for _, c := range cases {
		f, err := run(c, tmp, cert, key)
		if err != nil {
			log.Fatalf("%s: %v", c.name, err)
		}
		f.OpenSSL = strings.TrimSpace(string(version))
		b, err := json.MarshalIndent(f, "", " ")
		if err != nil {
			log.Fatal(err)
		}
		path := filepath.Join(*out, c.name+".json")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			log.Fatal(err)
		}
		log.Printf("wrote %s: %d chunks, %d key log bytes", path, len(f.Chunks), len(f.Keylog))
	}
}

// writeCert writes a self-signed ECDSA certificate for "tls.test".
func writeCert(certPath, keyPath string) error {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tls.test"}, DNSNames: []string{"tls.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return err
	}
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return err
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), 0o600)
}

// run records one case: s_server on one loopback port, the proxy on
// another, s_client through the proxy.
func run(c testCase, tmp, cert, key string) (*Fixture, error) {
	f := &Fixture{Name: c.name, Suite: c.suite}
	serverPort, err := freePort()
	if err != nil {
		return nil, err
	}
	keylog := filepath.Join(tmp, c.name+".keylog")
	srv := exec.Command("openssl", "s_server", "-accept", fmt.Sprintf("127.0.0.1:%d", serverPort), "-cert", cert, "-key", key,
		"-tls1_3", "-ciphersuites", c.suite, "-naccept", "1")
	srvIn, err := srv.StdinPipe()
	if err != nil {
		return nil, err
	}
	srvOut, err := srv.StdoutPipe()
	if err != nil {
		return nil, err
	}
	srv.Stderr = srv.Stdout
	if err := srv.Start(); err != nil {
		return nil, err
	}
	defer srv.Process.Kill()
	if err := waitFor(srvOut, "ACCEPT"); err != nil {
		return nil, fmt.Errorf("s_server: %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer l.Close()
	var mu sync.Mutex
	done := make(chan error, 1)
	go func() { done <- proxy(l, serverPort, &mu, &f.Chunks) }()

	cl := exec.Command("openssl", "s_client", "-connect", l.Addr().String(), "-servername", "tls.test",
		"-tls1_3", "-ciphersuites", c.suite, "-keylogfile", keylog)
	clIn, err := cl.StdinPipe()
	if err != nil {
		return nil, err
	}
	var clOut bytes.Buffer // read once the client has ended
	cl.Stdout, cl.Stderr = &clOut, &clOut
	if err := cl.Start(); err != nil {
		return nil, err
	}
	defer cl.Process.Kill()
	time.Sleep(500 * time.Millisecond) // the handshake
	// The two sides type in turn, a line every 100 ms.
	for i := range max(len(c.client), len(c.serv)) {
		for _, side := range []struct {
			lines []string
			in    io.Writer
			data  *string
		}{{c.client, clIn, &f.ClientData}, {c.serv, srvIn, &f.ServerData}} {
			if i >= len(side.lines) || side.lines[i] == "" {
				continue
			}
			line := side.lines[i]
			if _, err := io.WriteString(side.in, line); err != nil {
				return nil, err
			}
			if cmd := strings.TrimSpace(line); cmd != "k" && cmd != "K" {
				*side.data += line
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	time.Sleep(300 * time.Millisecond)
	clIn.Close() // end of input: s_client closes the connection
	cl.Wait()
	srvIn.Close()
	srv.Wait()
	if err := <-done; err != nil {
		return nil, err
	}
	b, err := os.ReadFile(keylog)
	if err != nil {
		return nil, fmt.Errorf("key log: %v\nclient:\n%s", err, clOut.String())
	}
	f.Keylog = string(b)
	mu.Lock()
	defer mu.Unlock()
	return f, nil
}

// proxy accepts one connection and copies it to the server, both ways,
// recording each read in the order the reads returned.
func proxy(l net.Listener, port int, mu *sync.Mutex, chunks *[]Chunk) error {
	c, err := l.Accept()
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	defer s.Close()
	var wg sync.WaitGroup
	for dir, pair := range [2][2]net.Conn{{c, s}, {s, c}} {
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := pair[0].Read(buf)
				if n > 0 {
					// Recorded before it is passed on: the peer answers
					// only what it got, so the order is one a capture
					// could show.
					mu.Lock()
					*chunks = append(*chunks, Chunk{Dir: dir, Data: bytes.Clone(buf[:n])})
					mu.Unlock()
					if _, err := pair[1].Write(buf[:n]); err != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			if tc, ok := pair[1].(*net.TCPConn); ok {
				tc.CloseWrite()
			}
		})
	}
	wg.Wait()
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitFor reads r, a process's output, until a line holds what, for up
// to 5 s; the rest of r is then read and dropped, so the process never
// blocks on it.
func waitFor(r io.Reader, what string) error {
	found := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(r)
		var seen []string
		for sc.Scan() {
			if strings.Contains(sc.Text(), what) {
				found <- nil
				io.Copy(io.Discard, r)
				return
			}
			seen = append(seen, sc.Text())
		}
		found <- fmt.Errorf("no %q in its output:\n%s", what, strings.Join(seen, "\n"))
	}()
	select {
	case err := <-found:
		return err
	case <-time.After(5 * time.Second):
		return fmt.Errorf("no %q after 5 s", what)
	}
}
