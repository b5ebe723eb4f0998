package tlsdec

import (
	"crypto/tls"
	"testing"
	"time"
)

// BenchmarkDecrypt decrypts a real connection of crypto/tls that carries
// 4 MiB from the server in 16 KiB records, handshake included, fed as
// 1448-byte segments (a loopback capture's MSS is larger, an Ethernet
// one's this); MB/s counts the TLS bytes fed, records and their headers.
// One core: a Conn is one goroutine's.
//
//	go test -run XXX -bench Decrypt -benchmem -cpu 1 ./tlsdec
func BenchmarkDecrypt(b *testing.B) {
	for _, v := range []variant{
		{name: "TLS1.3-AES128GCM"},
		{name: "TLS1.2-AES256GCM", maxVersion: tls.VersionTLS12, suite: tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384},
		{name: "TLS1.2-ChaCha20Poly1305", maxVersion: tls.VersionTLS12, suite: tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256},
	} {
		v.writeSize = 16 << 10
		rec := record(b, v, nil, payload(1000, 1), payload(4<<20, 2))
		keys := mustKeys(b, rec.keylog)
		var segs []chunk
		total := 0
		for _, ch := range rec.chunks {
			for p := ch.b; len(p) > 0; {
				n := min(len(p), 1448)
				segs = append(segs, chunk{ch.dir, p[:n]})
				p = p[n:]
			}
			total += len(ch.b)
		}
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(total))
			b.ReportAllocs()
			var got int64
			for b.Loop() {
				c := NewConn(Options{Keys: keys, Data: func(_ Direction, _ time.Time, p []byte) { got += int64(len(p)) }})
				for _, s := range segs {
					c.Feed(s.dir, t0, s.b)
				}
				c.End(t0)
				if st := c.Status(); st.Why != "" || st.ServerData != 4<<20 {
					b.Fatalf("status %+v", st)
				}
			}
		})
	}
}
