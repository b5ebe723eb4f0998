package h2

import (
	"fmt"
	"slices"
	"time"
)

// AgeCluster is what a server's MaxConnectionAge looks like on the wire:
// on several connections, the server's first GOAWAY came at about the same
// connection age (grpc-go draws each connection's age within ±10 % of the
// setting, https://github.com/grpc/proposal/blob/master/A9-server-side-conn-mgt.md).
type AgeCluster struct {
	// Age is the median age of the cluster's GOAWAYs; Conns counts the
	// connections whose first server GOAWAY lies within ±15 % of it, and
	// Min and Max are the least and the greatest of their ages.
	Age, Min, Max time.Duration
	Conns         int
}

// MaxConnectionAge finds the cluster of ages of the server's first GOAWAY
// (NO_ERROR) over connections; ok when at least two connections fall in
// it.
func MaxConnectionAge(ds []Digest) (c AgeCluster, ok bool) {
	var ages []time.Duration
	for _, d := range ds {
		if d.GoAway != nil && d.GoAway.GoAway.Code == "NO_ERROR" {
			ages = append(ages, d.GoAway.Age)
		}
	}
	if len(ages) < 2 {
		return c, false
	}
	slices.Sort(ages)
	c.Age = median(ages)
	for _, a := range ages {
		if float64(a) >= 0.85*float64(c.Age) && float64(a) <= 1.15*float64(c.Age) {
			if c.Conns == 0 {
				c.Min = a
			}
			c.Max = a
			c.Conns++
		}
	}
	return c, c.Conns >= 2
}

// Text says it as "GOAWAY at connection age ≈ 2 s on 3 connections (the
// server's max connection age; 1.9 s to 2.1 s)".
func (c AgeCluster) Text() string {
	return fmt.Sprintf("GOAWAY at connection age ≈ %s on %d connections (the server's max connection age; %s to %s)",
		approx(c.Age), c.Conns, approx(c.Min), approx(c.Max))
}
