package tlsdec

import (
	"bytes"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDecryptRealSessions decrypts connections of crypto/tls in every
// version and AEAD suite it speaks, whole and cut into pieces of every
// size from 1 byte: each side's application bytes come out as sent, and
// the status names the version and suite the client negotiated.
func TestDecryptRealSessions(t *testing.T) {
	tests := []variant{
		{name: "TLS 1.3 default"},
		{name: "TLS 1.3 HelloRetryRequest", serverCurves: []tls.CurveID{tls.CurveP384}},
		{name: "TLS 1.2 ECDHE-ECDSA AES-128-GCM", maxVersion: tls.VersionTLS12, suite: tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		{name: "TLS 1.2 ECDHE-ECDSA AES-256-GCM", maxVersion: tls.VersionTLS12, suite: tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384},
		{name: "TLS 1.2 ECDHE-ECDSA ChaCha20-Poly1305", maxVersion: tls.VersionTLS12, suite: tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256},
		{name: "TLS 1.2 ECDHE-RSA AES-128-GCM", maxVersion: tls.VersionTLS12, suite: tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, rsa: true},
		{name: "TLS 1.2 ECDHE-RSA AES-256-GCM", maxVersion: tls.VersionTLS12, suite: tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, rsa: true},
		{name: "TLS 1.2 ECDHE-RSA ChaCha20-Poly1305", maxVersion: tls.VersionTLS12, suite: tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, rsa: true},
	}
	for _, v := range tests {
		t.Run(v.name, func(t *testing.T) {
			rec := record(t, v, nil, payload(3000, 1), payload(40000, 2))
			keys := mustKeys(t, rec.keylog)
			// The key log's lines name the one connection by its random.
			random := strings.Fields(string(rec.keylog))[1]
			want := Status{Version: versionName(rec.state.Version), Suite: tls.CipherSuiteName(rec.state.CipherSuite), ClientRandom: random,
				HelloRetry: rec.state.HelloRetryRequest, Decoded: true, ClientData: 3000, ServerData: 40000}
			for _, cut := range []int{0, 1, 2, 5, 6, 7, 100, 1448} {
				got := decode(rec, keys, cut)
				if diff := cmp.Diff(want, got.Status, ignoreCounts); diff != "" {
					t.Errorf("cut %d: (-want +got)\n%s", cut, diff)
				}
				for d := range got.Data {
					if !bytes.Equal(got.Data[d], rec.sent[d]) {
						t.Errorf("cut %d: %s data: %d bytes, not the %d sent", cut, Direction(d).sender(), len(got.Data[d]), len(rec.sent[d]))
					}
				}
			}
			if v.serverCurves != nil && !rec.state.HelloRetryRequest {
				t.Errorf("the server's curves did not make a HelloRetryRequest: the case tests nothing")
			}
		})
	}
}

// ignoreCounts leaves out the record counts and alerts, which depend on
// how crypto/tls wrote the records, not on the decoding.
var ignoreCounts = cmp.FilterPath(func(p cmp.Path) bool {
	switch p.Last().String() {
	case ".ClientRecords", ".ServerRecords", ".Decrypted", ".Alerts":
		return true
	}
	return false
}, cmp.Ignore())

// TestResumedSessions decrypts a second connection that resumed the
// first's session, the two read in order with one key log, as a capture
// holds them: TLS 1.3 logs a resumption's secrets as any connection's;
// for TLS 1.2 crypto/tls logs full handshakes only, so the session's
// master secret is the one the first connection used.
func TestResumedSessions(t *testing.T) {
	for _, v := range []variant{
		{name: "TLS 1.3"},
		{name: "TLS 1.2 ticket", maxVersion: tls.VersionTLS12, suite: tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
	} {
		t.Run(v.name, func(t *testing.T) {
			cache := tls.NewLRUClientSessionCache(4)
			first := record(t, v, cache, payload(10, 1), payload(10, 2))
			rec := record(t, v, cache, payload(500, 3), payload(700, 4))
			if !rec.state.DidResume {
				t.Fatal("the second connection did not resume: the case tests nothing")
			}
			keys := mustKeys(t, append(first.keylog, rec.keylog...))
			decode(first, keys, 0)
			got := decode(rec, keys, 0)
			if diff := cmp.Diff(rec.sent, got.Data); diff != "" || !got.Status.Decoded || got.Status.Why != "" {
				t.Errorf("status %+v; data (-want +got)\n%s", got.Status, diff)
			}
			alone := decode(rec, mustKeys(t, rec.keylog), 0)
			if v.maxVersion == tls.VersionTLS12 && alone.Status.Why != WhyNoKey {
				t.Errorf("without the first connection: status %+v, want %q", alone.Status, WhyNoKey)
			}
		})
	}
}

// keylogLines rewrites a key log: each line through f, which returns
// its label and secret, or "" to drop the line.
func keylogLines(b []byte, f func(label string, secret []byte) (string, []byte)) []byte {
	var out bytes.Buffer
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		fs := strings.Fields(line)
		secret, _ := hex.DecodeString(fs[2])
		if label, secret := f(fs[0], secret); label != "" {
			fmt.Fprintf(&out, "%s %s %x\n", label, fs[1], secret)
		}
	}
	return out.Bytes()
}

// TestNotDecoded holds what the status says when the key log cannot
// decrypt a connection, or the capture does not hold it whole.
func TestNotDecoded(t *testing.T) {
	v13 := variant{name: "TLS 1.3"}
	v12 := variant{name: "TLS 1.2", maxVersion: tls.VersionTLS12, suite: tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	cbc := variant{name: "TLS 1.2 CBC", maxVersion: tls.VersionTLS12, suite: tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}
	flip := func(label string, secret []byte) (string, []byte) { secret[0] ^= 1; return label, secret }
	drop := func(f func(string) bool) func(string, []byte) (string, []byte) {
		return func(l string, s []byte) (string, []byte) {
			if f(l) {
				return "", nil
			}
			return l, s
		}
	}
	type want struct {
		why     string
		decoded bool
		// data is whether each side's application bytes came out whole.
		data [2]bool
	}
	tests := []struct {
		name string
		v    variant
		// keys rewrites the key log; edit the recording.
		keys func(label string, secret []byte) (string, []byte)
		edit func(rec *recording)
		want want
	}{
		{name: "TLS 1.3 empty key log", v: v13, keys: drop(func(string) bool { return true }), want: want{why: WhyNoKey}},
		{name: "TLS 1.2 empty key log", v: v12, keys: drop(func(string) bool { return true }), want: want{why: WhyNoKey}},
		{name: "TLS 1.3 every secret wrong", v: v13, keys: flip, want: want{why: WhyWrongKey}},
		{name: "TLS 1.2 master secret wrong", v: v12, keys: flip, want: want{why: WhyWrongKey}},
		{name: "TLS 1.3 server secrets wrong", v: v13, keys: func(l string, s []byte) (string, []byte) {
			if strings.HasPrefix(l, "SERVER") {
				s[0] ^= 1
			}
			return l, s
		}, want: want{why: WhyWrongKey, decoded: true, data: [2]bool{true, false}}},
		{name: "TLS 1.3 handshake secrets missing", v: v13, keys: drop(func(l string) bool { return strings.Contains(l, "HANDSHAKE") }),
			want: want{decoded: true, data: [2]bool{true, true}}},
		{name: "TLS 1.3 application secrets missing", v: v13, keys: drop(func(l string) bool { return strings.HasSuffix(l, "_0") }),
			want: want{why: WhyNoKey, decoded: true}},
		{name: "TLS 1.3 secrets of SHA-384's length for a SHA-256 suite", v: v13, keys: func(l string, s []byte) (string, []byte) {
			return l, append(s, make([]byte, 48-len(s))...)
		}, want: want{why: WhyWrongKey}},
		{name: "TLS 1.2 CBC suite", v: cbc, want: want{why: WhyUnsupportedSuite}},
		{name: "server never answers", v: v13, edit: func(rec *recording) { rec.chunks = rec.chunks[:1] }, want: want{why: WhyNoServerHello}},
		{name: "capture without the ClientHello", v: v13, edit: func(rec *recording) { rec.chunks = rec.chunks[1:] }, want: want{why: WhyNoHandshake}},
		{name: "connection cut inside the server's last record", v: v13, edit: func(rec *recording) {
			last := &rec.chunks[len(rec.chunks)-1]
			for i := len(rec.chunks) - 1; i >= 0; i-- {
				if rec.chunks[i].dir == ServerToClient {
					last = &rec.chunks[i]
					break
				}
			}
			last.b = last.b[:len(last.b)-3]
		}, want: want{why: WhyDamagedRecord, decoded: true, data: [2]bool{true, true}}},
		{name: "a record header declaring 65535 bytes", v: v13, edit: func(rec *recording) {
			rec.chunks = append(rec.chunks[:len(rec.chunks):len(rec.chunks)], chunk{ServerToClient, []byte{23, 3, 3, 0xff, 0xff, 1, 2, 3}})
		}, want: want{why: WhyDamagedRecord, decoded: true, data: [2]bool{true, true}}},
		{name: "bytes that are no record header", v: v12, edit: func(rec *recording) {
			rec.chunks = append([]chunk{rec.chunks[0], {ClientToServer, []byte("GET / HTTP/1.1\r\n")}}, rec.chunks[1:]...)
		}, want: want{why: WhyDamagedRecord, decoded: true, data: [2]bool{false, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := record(t, tt.v, nil, payload(2000, 1), payload(3000, 2))
			if tt.keys != nil {
				rec.keylog = keylogLines(rec.keylog, tt.keys)
			}
			if tt.edit != nil {
				tt.edit(&rec)
			}
			got := decode(rec, mustKeys(t, rec.keylog), 0)
			g := want{why: got.Status.Why, decoded: got.Status.Decoded}
			for d := range got.Data {
				g.data[d] = bytes.Equal(got.Data[d], rec.sent[d])
			}
			if diff := cmp.Diff(tt.want, g, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got)\n%s\nstatus: %+v", diff, got.Status)
			}
			if (got.Status.Why == "") != (got.Status.Detail == "") {
				t.Errorf("why %q with detail %q: both or neither", got.Status.Why, got.Status.Detail)
			}
		})
	}
}

// TestGap: bytes the capture lost stop that direction only.
func TestGap(t *testing.T) {
	rec := record(t, variant{name: "TLS 1.3"}, nil, payload(2000, 1), payload(30000, 2))
	var data [2][]byte
	c := NewConn(Options{Keys: mustKeys(t, rec.keylog), Data: func(d Direction, _ time.Time, b []byte) { data[d] = append(data[d], b...) }})
	lost := false
	for _, ch := range rec.chunks {
		if ch.dir == ServerToClient && len(data[ServerToClient]) > 0 && !lost {
			c.Gap(ServerToClient, t0, int64(len(ch.b)))
			lost = true
			continue
		}
		c.Feed(ch.dir, t0, ch.b)
	}
	c.End(t0)
	st := c.Status()
	if st.Why != WhyDamagedRecord || !bytes.Equal(data[ClientToServer], rec.sent[ClientToServer]) || len(data[ServerToClient]) >= len(rec.sent[ServerToClient]) {
		t.Errorf("status %+v; client data whole %v, server data %d of %d bytes", st, bytes.Equal(data[ClientToServer], rec.sent[ClientToServer]),
			len(data[ServerToClient]), len(rec.sent[ServerToClient]))
	}
}
