package flows

import (
	"cmp"
	"encoding/json"
	"iter"
	"slices"
	"time"

	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/tlsdec"
)

// Timelines are a report's connections, in order of start: At builds each
// one's Timeline from what was kept of it once it ended, a few words for
// most connections. With 100 000 connections the timelines built whole,
// with the reports they came from, were most of `audit h2`'s memory.
type Timelines struct {
	recs blocks[record]
	// ds are the connections' digests, in the same order; next finds a
	// client's next connection among them.
	ds   []h2.Digest
	next h2.NextConns
}

// record is a connection's Timeline but for what its digest holds (client,
// server, start), its number and its next connection.
type record struct {
	end     time.Time
	ended   string
	syn     bool
	streams []MethodCount
	// rare holds the rest, nil when all of it is empty, as it is for most
	// connections.
	rare *rare
}

// rare is what few connections' timelines have.
type rare struct {
	encrypted bool
	tls       *tlsdec.Status
	damaged   string
	warnings  []h2.Warning
	goAways   []GoAway
	pings     []Pings
	resets    []Reset
	refused   []Refused
	dropped   h2.Dropped
}

// Len counts the connections.
func (t *Timelines) Len() int { return t.recs.len() }

// At builds the i-th connection's Timeline.
func (t *Timelines) At(i int) Timeline {
	r, d := t.recs.at(i), &t.ds[i]
	tl := Timeline{Conn: i, Client: d.Client, Server: d.Server, Start: d.Start, End: r.end, SYN: r.syn, Ended: r.ended, Streams: r.streams}
	if x := r.rare; x != nil {
		tl.Encrypted, tl.TLS, tl.Damaged, tl.Warnings, tl.Dropped = x.encrypted, x.tls, x.damaged, x.warnings, x.dropped
		tl.GoAways, tl.Pings, tl.Resets, tl.Refused = x.goAways, x.pings, x.resets, x.refused
	}
	tl.Next = t.nextOf(i, r, d)
	return tl
}

// tally counts the connections encrypted, damaged, and decrypted with the
// key log, from their records: what a report's first line says.
func (t *Timelines) tally() (enc, dam, dec int) {
	for i := range t.Len() {
		x := t.recs.at(i).rare
		switch {
		case x == nil:
		case x.encrypted:
			enc++
		case x.tls != nil:
			dec++
		}
		if x != nil && x.damaged != "" {
			dam++
		}
	}
	return enc, dam, dec
}

// All yields every connection's Timeline, in order.
func (t *Timelines) All() iter.Seq[Timeline] {
	return func(yield func(Timeline) bool) {
		for i := range t.Len() {
			if !yield(t.At(i)) {
				return
			}
		}
	}
}

// MarshalJSON writes the connections as a JSON array of Timelines, built
// whole; Report.WriteJSON writes them one at a time instead.
func (t Timelines) MarshalJSON() ([]byte, error) {
	all := make([]Timeline, 0, t.Len())
	for tl := range t.All() {
		all = append(all, tl)
	}
	return json.Marshal(all)
}

// nextOf finds the client's next connection (h2.NextConns) after the
// server's first GOAWAY on the i-th connection, else after its end.
func (t *Timelines) nextOf(i int, r *record, d *h2.Digest) *Next {
	n := &Next{After: "goaway"}
	switch {
	case d.GoAway != nil:
		n.At = d.GoAway.Time
	case r.ended == EndedOpen:
		return nil
	default:
		n.After, n.At = "close", r.end
	}
	n.Conn = t.next.After(i, n.At)
	if n.Conn >= 0 {
		n.Start = t.ds[n.Conn].Start
		n.Delay = n.Start.Sub(n.At)
	}
	return n
}

// kept is what Audit keeps of each connection as it ends: its record, its
// digest, and the findings it shows alone. No Report is held past its
// connection's end.
type kept struct {
	Timelines
	// findings are the connections' own, each Conn indexing them as kept.
	findings []h2.Finding
	// methods holds each method name once.
	methods map[string]string
}

// add keeps c.
func (k *kept) add(c Conn) {
	k.findings = append(k.findings, h2.Findings(c.Report, k.Len())...)
	k.recs.add(k.recordOf(c))
	k.ds = append(k.ds, h2.DigestOf(c.Report))
}

// recordOf reads c's record.
func (k *kept) recordOf(c Conn) record {
	r := c.Report
	rec := record{end: r.End, ended: c.Ended, syn: c.SYN, streams: []MethodCount{}}
	for _, s := range r.Streams {
		i := slices.IndexFunc(rec.streams, func(m MethodCount) bool { return m.Method == s.Method })
		if i < 0 {
			rec.streams = append(rec.streams, MethodCount{Method: k.method(s.Method)})
			i = len(rec.streams) - 1
		}
		rec.streams[i].Count++
	}
	x := rare{encrypted: r.Encrypted, tls: c.TLS, damaged: r.Damaged, warnings: r.Warnings, dropped: r.Dropped}
	for _, g := range h2.GoAways(r) {
		x.goAways = append(x.goAways, GoAway{Time: g.Time, Dir: g.Dir, Age: g.Age, LastStreamID: g.GoAway.LastStreamID,
			Code: g.GoAway.Code, Debug: g.GoAway.Debug, InFlight: g.GoAway.InFlight, MoreInFlight: g.GoAway.MoreInFlight})
	}
	for _, d := range []h2.Direction{h2.ClientToServer, h2.ServerToClient} {
		if p := h2.PingCadence(r, d); p.Count > 0 || p.Probes > 0 {
			x.pings = append(x.pings, Pings{Dir: d, Count: p.Count, Probes: p.Probes, Acks: p.Acks, Min: p.Min, Median: p.Median})
		}
	}
	for _, e := range r.Events {
		if e.Kind == h2.KindRSTStream {
			x.resets = append(x.resets, Reset{Time: e.Time, Dir: e.Dir, Stream: e.Stream, Code: e.Code})
		}
	}
	for _, f := range h2.RefusedAfterGoAway(r) {
		x.refused = append(x.refused, Refused{Stream: f.Stream, Method: f.Method, Outcome: f.Outcome})
	}
	if !x.empty() {
		rec.rare = &x
	}
	return rec
}

func (x *rare) empty() bool {
	return !x.encrypted && x.tls == nil && x.damaged == "" && x.warnings == nil && x.goAways == nil &&
		x.pings == nil && x.resets == nil && x.refused == nil && x.dropped == (h2.Dropped{})
}

// method returns s, or the same name kept before.
func (k *kept) method(s string) string {
	if m, ok := k.methods[s]; ok {
		return m
	}
	if k.methods == nil {
		k.methods = map[string]string{}
	}
	k.methods[s] = s
	return s
}

// order puts the connections kept in order of start, then of client (then
// of their end), and returns the findings, connection by connection, then
// across them.
func (k *kept) order(diag h2.DiagnoseOptions) []h2.Finding {
	order := make([]int32, k.Len())
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		x, y := &k.ds[a], &k.ds[b]
		return cmp.Or(compareConns(x.Start, x.Client, y.Start, y.Client), cmp.Compare(a, b))
	})
	rank := make([]int32, len(order))
	for i, j := range order {
		rank[j] = int32(i)
	}
	permute(rank, func(i, j int) {
		*k.recs.at(i), *k.recs.at(j) = *k.recs.at(j), *k.recs.at(i)
		k.ds[i], k.ds[j] = k.ds[j], k.ds[i]
	})
	for i := range k.findings {
		k.findings[i].Conn = int(rank[k.findings[i].Conn])
	}
	slices.SortStableFunc(k.findings, func(x, y h2.Finding) int { return cmp.Compare(x.Conn, y.Conn) })
	k.next = h2.NewNextConns(k.ds)
	return append(k.findings, h2.Across(k.ds, diag)...)
}

// permute moves the i-th element to to[i], with swap: to is a
// permutation.
func permute(to []int32, swap func(i, j int)) {
	done := make([]bool, len(to))
	for i := range to {
		if done[i] {
			continue
		}
		done[i] = true
		// The i-th element is bound for j: put it there, and take the one
		// bound for to[j].
		for j := int(to[i]); j != i; j = int(to[j]) {
			swap(i, j)
			done[j] = true
		}
	}
}

// blockLen is how many values a block of blocks holds.
const blockLen = 4096

// blocks is a list that grows a block at a time: what it holds is never
// copied, nor left behind as garbage, as a slice's is when append outgrows
// it.
type blocks[T any] struct {
	b [][]T
	n int
}

func (l *blocks[T]) len() int { return l.n }

func (l *blocks[T]) at(i int) *T { return &l.b[i/blockLen][i%blockLen] }

func (l *blocks[T]) add(v T) {
	if l.n%blockLen == 0 {
		l.b = append(l.b, make([]T, blockLen))
	}
	l.b[l.n/blockLen][l.n%blockLen] = v
	l.n++
}
