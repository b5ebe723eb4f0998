// Command gen writes the committed capture fixtures of testdata/ and, on
// demand, a large benchmark capture. Every byte it writes follows from its
// flags: the fixtures are reproducible, and a test regenerates them and
// compares with the committed files.
//
//	go run ./capture/internal/gen -out testdata
//	go run ./capture/internal/gen -bench-out testdata/bench/big.pcap -bench-packets 2000000 -bench-peers 10000
//	go run ./capture/internal/gen -peers-out testdata/bench/peers-1000000-syn.pcap -peers 1000000 -peers-syn-only
//	go run ./capture/internal/gen -fleet-out /tmp/fleet.pcap -fleet-peers 3000
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	out := flag.String("out", "", "write the fixtures into this folder")
	benchOut := flag.String("bench-out", "", "write a benchmark capture (pcap, ns, Ethernet) to this file")
	var bc benchConfig
	flag.IntVar(&bc.packets, "bench-packets", 2_000_000, "packets in the benchmark capture")
	flag.IntVar(&bc.peers, "bench-peers", 10_000, "reconnecting clients in the benchmark capture")
	flag.Uint64Var(&bc.seed, "bench-seed", 1, "random seed of the benchmark captures")
	peersOut := flag.String("peers-out", "", "write a capture of spec-following peers (pcap, ns, Ethernet) to this file")
	pc := peersConfig{}
	flag.IntVar(&pc.peers, "peers", 100_000, "peers in the capture of spec-following peers")
	flag.IntVar(&pc.waves, "peers-waves", 1, "waves the peers arrive in")
	flag.DurationVar(&pc.every, "peers-every", 6*time.Minute, "time from one wave's start to the next's")
	flag.DurationVar(&pc.spread, "peers-spread", time.Minute, "a wave's peers make their first attempt within this time of its start")
	flag.DurationVar(&pc.retry, "peers-retry", 2*time.Minute, "each peer retries for this long")
	flag.BoolVar(&pc.synOnly, "peers-syn-only", false, "write only the SYNs (a capture made with a SYN filter)")
	fleetOut := flag.String("fleet-out", "", "write a capture of a fleet of clients with known schedules (pcap, ns, Ethernet) to this file")
	fleetPeers := flag.Int("fleet-peers", 3000, "clients in the fleet capture")
	fleetSeed := flag.Uint64("fleet-seed", 1, "random seed of the fleet capture")
	flag.Parse()
	if flag.NArg() > 0 || (*out == "" && *benchOut == "" && *peersOut == "" && *fleetOut == "") {
		fmt.Fprintln(os.Stderr, "usage: gen [-out DIR] [-bench-out FILE [-bench-packets N] [-bench-peers N]] [-peers-out FILE [-peers N] [-peers-waves W] [-peers-every D] [-peers-spread D] [-peers-retry D] [-peers-syn-only]] [-bench-seed N] [-fleet-out FILE [-fleet-peers N] [-fleet-seed N]]")
		os.Exit(2)
	}
	if *out != "" {
		if err := writeFixtures(*out); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
	}
	if *benchOut != "" {
		st, err := writeBench(*benchOut, bc)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "%s: %d packets, %d bytes, %d peers, %d attempts, %d SYNs to port %d\n",
			*benchOut, st.packets, st.bytes, st.peers, st.attempts, st.retrySYNs, retryPort)
	}
	if *peersOut != "" {
		pc.seed = bc.seed
		st, err := writePeers(*peersOut, pc)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "%s: %d packets, %d bytes, %d peers, %d attempts, %d SYNs to port %d\n",
			*peersOut, st.packets, st.bytes, st.peers, st.attempts, st.retrySYNs, retryPort)
	}
	if *fleetOut != "" {
		st, err := writeFleet(*fleetOut, *fleetPeers, *fleetSeed)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "%s: %d packets, %d attempts to port %d; peers by schedule (address 10.(100+i).x.y):\n",
			*fleetOut, st.packets, st.attempts, retryPort)
		for i, n := range st.peers {
			fmt.Fprintf(os.Stderr, "  %d %-18s %d\n", i, fleetSchedules[i].name, n)
		}
	}
}
