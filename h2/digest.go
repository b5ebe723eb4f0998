package h2

import (
	"cmp"
	"net/netip"
	"slices"
	"time"
)

// Digest is what the findings across connections (MaxConnectionAge,
// Reconnects, RetryChains) read of one connection: a caller that holds
// many connections keeps it, and lets the Report go, once the connection
// ended.
type Digest struct {
	Client netip.AddrPort
	Server netip.AddrPort
	Start  time.Time
	// GoAway is the server's first GOAWAY, with the connection's age then;
	// nil when the server sent none.
	GoAway *GoAwayAge
	// RPCs are the streams with a method that a retry chain may hold, in
	// the order they started: every one but a first attempt that ended
	// OK, which is neither retried nor a retry (RetryChains).
	RPCs []RPC
}

// RPC is one stream of a Digest: its method, and the attempt it is (its
// Conn unset).
type RPC struct {
	Method  string
	Attempt Attempt
}

// DigestOf reads r's Digest.
func DigestOf(r *Report) Digest {
	d := Digest{Client: r.Client, Server: r.Server, Start: r.Start}
	for _, g := range GoAways(r) {
		if g.Dir == ServerToClient {
			d.GoAway = &g
			break
		}
	}
	for _, s := range r.Streams {
		if s.Method == "" || s.PreviousAttempts == 0 && s.GRPCStatus == "OK" {
			continue
		}
		a := Attempt{Stream: s.ID, Number: s.PreviousAttempts + 1, Start: s.Start, End: s.Start, Status: s.GRPCStatus, Pushback: s.RetryPushback}
		switch {
		case !s.ResponseEnd.IsZero():
			a.End = s.ResponseEnd
		case !s.End.IsZero():
			a.End = s.End
		}
		d.RPCs = append(d.RPCs, RPC{Method: s.Method, Attempt: a})
	}
	return d
}

// Digests reads each report's Digest, in the same order.
func Digests(conns []*Report) []Digest {
	out := make([]Digest, len(conns))
	for i, r := range conns {
		out[i] = DigestOf(r)
	}
	return out
}

// NextConns finds a client's next connection: it orders connections by
// client address, server and start.
type NextConns struct {
	ds    []Digest
	order []int32
}

// NewNextConns indexes ds (of one capture, any order).
func NewNextConns(ds []Digest) NextConns {
	n := NextConns{ds: ds, order: make([]int32, len(ds))}
	for i := range n.order {
		n.order[i] = int32(i)
	}
	slices.SortFunc(n.order, func(a, b int32) int {
		x, y := &n.ds[a], &n.ds[b]
		return cmp.Or(sameClient(x, y), x.Start.Compare(y.Start), cmp.Compare(a, b))
	})
	return n
}

// sameClient compares x's client address and server with y's.
func sameClient(x, y *Digest) int {
	return cmp.Or(x.Client.Addr().Compare(y.Client.Addr()), x.Server.Compare(y.Server))
}

// After returns the first connection (by start, then by index) of ds[i]'s
// client address to its server, ds[i] aside, that started at or after at;
// -1 when there is none.
func (n NextConns) After(i int, at time.Time) int {
	c := &n.ds[i]
	k, _ := slices.BinarySearchFunc(n.order, at, func(j int32, at time.Time) int {
		y := &n.ds[j]
		if o := sameClient(y, c); o != 0 {
			return o
		}
		if y.Start.Before(at) {
			return -1
		}
		return 1
	})
	for ; k < len(n.order); k++ {
		j := int(n.order[k])
		if sameClient(&n.ds[j], c) != 0 {
			return -1
		}
		if j != i {
			return j
		}
	}
	return -1
}
