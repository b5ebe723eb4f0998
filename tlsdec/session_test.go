package tlsdec

import (
	"bytes"
	"cmp"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"
)

// A recording is one real TLS connection between crypto/tls's client and
// server, in process: each side's writes in the order they were made (a
// side writes only what its reads allowed, so it is an order a capture
// could show), the client's key log, and the application bytes each side
// sent.
type recording struct {
	chunks     []chunk
	keylog     []byte
	sent       [2][]byte
	state      tls.ConnectionState
	clientConf *tls.Config
}

type chunk struct {
	dir Direction
	b   []byte
}

// stream is a direction's bytes, whole.
func (r recording) stream(d Direction) []byte {
	var b []byte
	for _, c := range r.chunks {
		if c.dir == d {
			b = append(b, c.b...)
		}
	}
	return b
}

// recorder wraps one side's end of a pipe and copies its writes.
type recorder struct {
	net.Conn
	dir Direction
	mu  *sync.Mutex
	out *[]chunk
}

func (w recorder) Write(b []byte) (int, error) {
	w.mu.Lock()
	*w.out = append(*w.out, chunk{w.dir, bytes.Clone(b)})
	w.mu.Unlock()
	return w.Conn.Write(b)
}

var (
	ecOnce, rsaOnce sync.Once
	ecCert, rsaCert tls.Certificate
)

// testCert makes a self-signed certificate for "tls.test", ECDSA or RSA,
// once each (an RSA key takes long to make).
func testCert(t testing.TB, useRSA bool) tls.Certificate {
	once, cert := &ecOnce, &ecCert
	if useRSA {
		once, cert = &rsaOnce, &rsaCert
	}
	once.Do(func() {
		var key crypto.Signer
		var err error
		if useRSA {
			key, err = rsa.GenerateKey(rand.Reader, 2048)
		} else {
			key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		}
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tls.test"}, DNSNames: []string{"tls.test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			t.Fatal(err)
		}
		*cert = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	})
	if cert.PrivateKey == nil {
		t.Fatal("test certificate not made")
	}
	return *cert
}

// variant is one kind of connection to record.
type variant struct {
	name string
	// min and max versions, suites (TLS 1.2 only) and curves of the client.
	maxVersion uint16
	suite      uint16
	rsa        bool
	// serverCurves, when set, makes the server accept only these groups
	// (a HelloRetryRequest when the client's first key share is another).
	serverCurves []tls.CurveID
	// writeSize is the most bytes a side writes at once (default 1000):
	// each write is a record of its own, up to 16 KiB.
	writeSize int
}

// record makes one connection of v: the client sends clientData, the
// server answers serverData, in writes of at most v.writeSize bytes, then
// both close. cache, when set, lets a second call resume the first's session.
func record(t testing.TB, v variant, cache tls.ClientSessionCache, clientData, serverData []byte) recording {
	t.Helper()
	cert := testCert(t, v.rsa)
	var rec recording
	var keylog bytes.Buffer
	var mu sync.Mutex
	cc, sc := tcpPair(t)
	pool := x509.NewCertPool()
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool.AddCert(leaf)
	clientConf := &tls.Config{ServerName: "tls.test", RootCAs: pool, KeyLogWriter: &keylog, MaxVersion: v.maxVersion,
		ClientSessionCache: cache, NextProtos: []string{"h2"}}
	if v.suite != 0 {
		clientConf.CipherSuites = []uint16{v.suite}
	}
	// A fixed ticket key, so that a second server resumes the first's
	// sessions.
	serverConf := &tls.Config{Certificates: []tls.Certificate{cert}, CurvePreferences: v.serverCurves, NextProtos: []string{"h2"},
		SessionTicketKey: [32]byte{1}, DynamicRecordSizingDisabled: true}
	write := cmp.Or(v.writeSize, 1000)
	client := tls.Client(recorder{cc, ClientToServer, &mu, &rec.chunks}, clientConf)
	server := tls.Server(recorder{sc, ServerToClient, &mu, &rec.chunks}, serverConf)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	go func() {
		defer server.Close()
		if err := server.HandshakeContext(ctx); err != nil {
			errs <- err
			return
		}
		got := make([]byte, len(clientData))
		if _, err := io.ReadFull(server, got); err != nil {
			errs <- err
			return
		}
		err := writeIn(server, serverData, write)
		server.Close()
		errs <- err
	}()
	go func() {
		defer client.Close()
		if err := client.HandshakeContext(ctx); err != nil {
			errs <- err
			return
		}
		if err := writeIn(client, clientData, write); err != nil {
			errs <- err
			return
		}
		got := make([]byte, len(serverData))
		_, err := io.ReadFull(client, got)
		client.Close()
		errs <- err
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	rec.keylog = keylog.Bytes()
	rec.sent = [2][]byte{clientData, serverData}
	rec.state = client.ConnectionState()
	rec.clientConf = clientConf
	return rec
}

// tcpPair returns both ends of a loopback TCP connection: a pipe would
// block each close_notify until the peer reads it.
func tcpPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	client, err = net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	return client, server
}

func writeIn(c *tls.Conn, b []byte, size int) error {
	for len(b) > 0 {
		n := min(len(b), size)
		if _, err := c.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// decoded is what a Conn made of a recording.
type decoded struct {
	Status Status
	Data   [2][]byte
}

// decode feeds rec's chunks to a Conn with keys, each cut into pieces of
// at most cut bytes (0: whole).
func decode(rec recording, keys *KeyLog, cut int) decoded {
	var out decoded
	c := NewConn(Options{Keys: keys, Data: func(d Direction, _ time.Time, b []byte) { out.Data[d] = append(out.Data[d], b...) }})
	for _, ch := range rec.chunks {
		b := ch.b
		for len(b) > 0 {
			n := len(b)
			if cut > 0 {
				n = min(n, cut)
			}
			c.Feed(ch.dir, t0, b[:n])
			b = b[n:]
		}
	}
	c.End(t0)
	out.Status = c.Status()
	return out
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// payload is n bytes that differ from record to record.
func payload(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

// mustKeys parses a key log.
func mustKeys(t testing.TB, b []byte) *KeyLog {
	t.Helper()
	k, err := ParseKeyLog(bytes.NewReader(b), "test.keylog")
	if err != nil {
		t.Fatal(err)
	}
	return k
}
