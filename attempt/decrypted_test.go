package attempt

import (
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt/internal/rec"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/backoff"
)

// TestDecrypt: what a key log showed of an attempt's TLS decides whether it
// reached READY where it decrypted the connection; elsewhere the flights'
// guess stands, and the fate says why the key log did not decrypt it.
// Every case is the same TLS 1.2 attempt, whose server's Finished opens
// the fourth flight of data: READY at 3 ms by its flights.
func TestDecrypt(t *testing.T) {
	segs := []Segment{synAck(0.02),
		fateSeg(0.1, true, rec.FlagACK|0x08, fateISN+1, fateServerISN+1, backoff.PayloadTLSClientHello),
		fateSeg(1, false, rec.FlagACK|0x08, fateServerISN+1, fateISN+518, backoff.PayloadTLSServerHello),
		fateSeg(2, true, rec.FlagACK|0x08, fateISN+518, fateServerISN+1500, backoff.PayloadOther),  // its key exchange, Finished
		fateSeg(3, false, rec.FlagACK|0x08, fateServerISN+1500, fateISN+700, backoff.PayloadOther), // the server's Finished
		fateSeg(4, false, rec.FlagFIN|rec.FlagACK, fateServerISN+1600, fateISN+700, "")}
	base := backoff.Ending{Fate: backoff.FateClosed, Accepted: fms(0.02), Duration: fms(4), ClientSent: backoff.PayloadTLSClientHello,
		ServerSent: backoff.PayloadTLSServerHello, Ready: true, ReadyAfter: fms(3)}
	with := func(f func(*backoff.Ending)) backoff.Ending {
		e := base
		f(&e)
		return e
	}
	this := Decryption{Src: fateClient, Dst: fateServer, ISN: fateISN}
	tests := []struct {
		name    string
		d       Decryption
		matched int
		want    backoff.Ending
	}{
		{name: "no key log", d: Decryption{}, want: base},
		{name: "the server's SETTINGS inside, after its Finished", d: decryption(this, true, 3.5, ""), matched: 1,
			want: with(func(e *backoff.Ending) { e.Decrypted, e.ReadyAfter = true, fms(3.5) })},
		{name: "decrypted whole, no SETTINGS: not READY, whatever the flights", d: decryption(this, true, 0, ""), matched: 1,
			want: with(func(e *backoff.Ending) { e.Decrypted, e.Ready, e.ReadyAfter = true, false, 0 })},
		{name: "decrypted up to a damaged record, no SETTINGS: the flights' guess", d: decryption(this, true, 0, "damaged record"), matched: 1,
			want: with(func(e *backoff.Ending) { e.Decrypted, e.NotDecrypted = true, "damaged record" })},
		{name: "not decrypted: the flights' guess", d: decryption(this, false, 0, "no key"), matched: 1,
			want: with(func(e *backoff.Ending) { e.NotDecrypted = "no key" })},
		{name: "another ISN: another attempt", d: func() Decryption { d := decryption(this, true, 0, ""); d.ISN++; return d }(), want: base},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker()
			tr.SetFatesKnown(true)
			tr.Add(SYN{Time: trackStart, Src: fateClient, Dst: fateServer, Seq: fateISN})
			for _, s := range segs {
				tr.AddSegment(&s)
			}
			if tt.d != (Decryption{}) {
				if got := tr.Decrypt([]Decryption{tt.d}); got != tt.matched {
					t.Errorf("Decrypt matched %d, want %d", got, tt.matched)
				}
			}
			// Every way of reading the tracker gives the same Ending.
			if diff := cmp.Diff(tt.want, tr.Ending(Attempt{Src: fateClient, Dst: fateServer, Seq: fateISN})); diff != "" {
				t.Errorf("Ending: (-want +got):\n%s", diff)
			}
			list := tr.List()
			chain := tr.Chains().Chain(0, nil)
			if len(list) != 1 || len(chain.Attempts) != 1 {
				t.Fatalf("%d and %d attempts, want 1", len(list), len(chain.Attempts))
			}
			if diff := cmp.Diff(tt.want, list[0].Ending); diff != "" {
				t.Errorf("List: Ending (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, chain.Attempts[0].Ending); diff != "" {
				t.Errorf("Chains: Ending (-want +got):\n%s", diff)
			}
		})
	}
}

// decryption is d decrypted or not, the server's SETTINGS at ms after the
// SYN (0: none), stopped for why.
func decryption(d Decryption, decrypted bool, ms float64, why string) Decryption {
	d.Decrypted, d.Why = decrypted, why
	if ms > 0 {
		d.Settings = trackStart.Add(time.Duration(ms * float64(time.Millisecond)))
	}
	return d
}
