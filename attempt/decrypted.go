package attempt

import (
	"net/netip"
	"time"

	"github.com/backoff-audit/audit/attempt/internal/rec"

	"github.com/backoff-audit/audit/backoff"
)

// Decryption is what a key log showed of one attempt's TLS connection
// (audit pcap --keylog: package flows decrypts it).
type Decryption struct {
	// Src, Dst and ISN name the attempt (docs/spec.md §5.2).
	Src, Dst netip.AddrPort
	ISN      uint32
	// Decrypted is set when the key log decrypted the connection; Settings
	// is when the server's first HTTP/2 SETTINGS came inside it, zero when
	// none did. Why is why it was not decrypted, or what stopped it
	// partway.
	Decrypted bool
	Settings  time.Time
	Why       string
}

// Decrypt gives the tracker's attempts what a key log showed of them: an
// attempt whose TLS was decrypted reached READY exactly when the server's
// SETTINGS came inside it, as a plaintext one does when they are its
// first bytes (docs/spec.md §7.2), and did not when the whole connection
// was decrypted without them; an attempt not decrypted, or decrypted only
// up to a damaged record, keeps what its flights showed. It returns how
// many of ds named an attempt of the tracker.
func (t *Tracker) Decrypt(ds []Decryption) (matched int) {
	if len(ds) == 0 {
		return 0
	}
	byKey := make(map[attemptKey]Decryption, len(ds))
	for _, d := range ds {
		byKey[attemptKey{src: d.Src.Addr().As16(), dst: d.Dst.Addr().As16(), sport: d.Src.Port(), dport: d.Dst.Port(), seq: d.ISN}] = d
	}
	if t.decrypted == nil {
		t.decrypted = make(map[attemptKey]Decryption)
	}
	t.settle() // the SYNs a PortTracker pushed become attempts
	for i := range t.attempts.n {
		k := t.rec(i).key
		if d, ok := byKey[k]; ok {
			t.decrypted[k] = d
			matched++
		}
	}
	return matched
}

// withDecryption applies to e, the Ending of the attempt of key k made at
// start, what Decrypt recorded of it.
func (t *Tracker) withDecryption(k *attemptKey, start rec.Stamp, e backoff.Ending) backoff.Ending {
	d, ok := t.decrypted[*k]
	switch {
	case !ok:
	case !d.Decrypted:
		e.NotDecrypted = d.Why
	case !d.Settings.IsZero():
		e.Decrypted, e.Ready = true, true
		e.ReadyAfter = time.Duration(d.Settings.UnixNano() - start.Nanos())
	case d.Why == "":
		e.Decrypted, e.Ready, e.ReadyAfter = true, false, 0
	default:
		// Decrypted up to a damaged record, before any SETTINGS: the
		// flights' guess stands.
		e.Decrypted, e.NotDecrypted = true, d.Why
	}
	return e
}
