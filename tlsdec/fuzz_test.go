package tlsdec

import (
	"bytes"
	"crypto/tls"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// cutsOf encodes a recording's chunks as FuzzRecords' cuts.
func cutsOf(rec recording) (client, server, cuts []byte) {
	for _, ch := range rec.chunks {
		if ch.dir == ClientToServer {
			client = append(client, ch.b...)
		} else {
			server = append(server, ch.b...)
		}
		for n := len(ch.b); n > 0; n -= min(n, 126) {
			cuts = append(cuts, byte(min(n, 126)-1)<<1|byte(ch.dir))
		}
	}
	return client, server, cuts
}

var whys = []string{"", WhyNoKey, WhyUnsupportedSuite, WhyUnsupportedVersion, WhyEarlyData, WhyDamagedRecord, WhyWrongKey, WhyNoHandshake, WhyNoServerHello}

// FuzzRecords feeds any bytes to a Conn as both directions of a
// connection, cut at any points, with any key log: each byte of cuts
// feeds the next (b>>1)+1 bytes of direction b&1, or, when b>>1 is 127,
// says 3 bytes of it were lost; the rest of each direction follows whole.
// Seeds are real connections of crypto/tls with their key logs. Nothing
// may panic; a direction never holds more than a record and a hello
// message; the status gives a known reason with its detail, or neither;
// and the same bytes fed one at a time decode to the same data and
// status.
func FuzzRecords(f *testing.F) {
	for _, v := range []variant{
		{name: "TLS 1.3"},
		{name: "TLS 1.2 GCM", maxVersion: tls.VersionTLS12, suite: tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		{name: "TLS 1.2 ChaCha20", maxVersion: tls.VersionTLS12, suite: tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256},
	} {
		rec := record(f, v, nil, payload(300, 1), payload(2000, 2))
		client, server, cuts := cutsOf(rec)
		f.Add(client, server, cuts, rec.keylog)
		f.Add(client, server, []byte{}, rec.keylog)
	}
	f.Add([]byte{22, 3, 1, 0xff, 0xff}, []byte{23, 3, 3, 0, 0}, []byte{0xfe, 0xff, 0x01}, []byte("CLIENT_RANDOM 00 00\n"))

	f.Fuzz(func(t *testing.T, client, server, cuts, keylog []byte) {
		type result struct {
			Status Status
			Data   [2][]byte
		}
		run := func(one bool) result {
			keys, err := ParseKeyLog(bytes.NewReader(keylog), "fuzz.keylog")
			if err != nil {
				t.Fatal(err)
			}
			var out result
			c := NewConn(Options{Keys: keys, Data: func(d Direction, _ time.Time, b []byte) { out.Data[d] = append(out.Data[d], b...) }})
			src := [2][]byte{client, server}
			feed := func(d Direction, b []byte) {
				for len(b) > 0 {
					n := len(b)
					if one {
						n = 1
					}
					c.Feed(d, t0, b[:n])
					b = b[n:]
					for i := range c.halves {
						h := &c.halves[i]
						if cap(h.body) > maxRecord || len(h.hs.body) > maxHello || cap(c.plain) > maxRecord {
							t.Fatalf("a direction holds %d record bytes and %d handshake bytes, over the bounds", cap(h.body), len(h.hs.body))
						}
					}
				}
			}
			for _, b := range cuts {
				d := Direction(b & 1)
				if b>>1 == 127 {
					n := min(3, len(src[d]))
					c.Gap(d, t0, int64(n))
					src[d] = src[d][n:]
					continue
				}
				n := min(int(b>>1)+1, len(src[d]))
				feed(d, src[d][:n])
				src[d] = src[d][n:]
			}
			feed(ClientToServer, src[0])
			feed(ServerToClient, src[1])
			c.End(t0.Add(time.Second))
			out.Status = c.Status()
			return out
		}
		whole, one := run(false), run(true)
		if diff := cmp.Diff(whole, one); diff != "" {
			t.Fatalf("fed whole and one byte at a time differ (-whole +one)\n%s", diff)
		}
		st := whole.Status
		if !slices.Contains(whys, st.Why) || (st.Why == "") != (st.Detail == "") {
			t.Errorf("why %q, detail %q: a known reason with its detail, or neither", st.Why, st.Detail)
		}
		if st.Decoded != (st.Decrypted > 0) || int64(len(whole.Data[0])) != st.ClientData || int64(len(whole.Data[1])) != st.ServerData {
			t.Errorf("status %+v does not count what was decrypted (%d and %d bytes)", st, len(whole.Data[0]), len(whole.Data[1]))
		}
	})
}
