package html

import (
	"bytes"
	"io"
	"testing"
)

// BenchmarkWrite writes the report of 10 000 peers (bigTracker's mix, as
// the bench capture's) as `audit pcap` would: JSON is the Audit's own
// writer, HTML this package's from the same Audit. Herd measures what the
// page needs beyond the JSON.
func BenchmarkWrite(b *testing.B) {
	const peers = 10000
	a := bigAudit(peers)
	var page, js bytes.Buffer
	if err := Write(&page, a); err != nil {
		b.Fatal(err)
	}
	if err := a.WriteJSON(&js); err != nil {
		b.Fatal(err)
	}
	b.Run("JSON", func(b *testing.B) {
		for b.Loop() {
			if err := a.WriteJSON(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(js.Len())/1e6, "MB")
	})
	b.Run("HTML", func(b *testing.B) {
		for b.Loop() {
			if err := Write(io.Discard, a); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(page.Len())/1e6, "MB")
	})
	b.Run("Herd", func(b *testing.B) {
		for b.Loop() {
			a.Herd()
		}
	})
}
