// Command gen writes a large synthetic h2c capture (package benchcap):
//
//	go run ./flows/internal/benchcap/gen -out testdata/bench/h2c-1000mb.pcap -mb 1000
//
// and 100 000 connections of headers alone (88 MB):
//
//	go run ./flows/internal/benchcap/gen -out testdata/bench/h2c-100k.pcap -mb 1 -conns 100000 -concurrent 64
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/backoff-audit/audit/flows/internal/benchcap"
)

func main() {
	out := flag.String("out", "", "the capture file to write")
	mb := flag.Int64("mb", 1000, "about the file's size, in MB (10^6 bytes)")
	conns := flag.Int("conns", 64, "connections")
	concurrent := flag.Int("concurrent", 16, "connections open at once")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "gen: -out FILE is required")
		os.Exit(2)
	}
	n, err := benchcap.Write(*out, benchcap.Config{Bytes: *mb * 1e6, Conns: *conns, Concurrent: *concurrent})
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: %d packets\n", *out, n)
}
