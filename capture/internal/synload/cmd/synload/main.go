//go:build linux

// Command synload sends crafted TCP SYNs to a port on 127.0.0.1 and ::1 at
// a target rate, bounded by count and time, and prints what it sent as one
// JSON line. .ci/synload.sh runs it against `audit live` (see package
// synload and RELIABILITY.md, "Live faults and capture load").
//
//	synload -port 40001 -rate 50000 -duration 5s [-count N] [-family both] [-sources 250]
//
// Needs root or CAP_NET_RAW. Exit 0 when it ran (send errors are in the
// JSON), 2 on bad flags or without a raw socket.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/backoff-audit/audit/capture/internal/synload"
)

func main() {
	var cfg synload.Config
	port := flag.Uint("port", 0, "destination port (closed: nothing listening)")
	flag.IntVar(&cfg.Rate, "rate", 10_000, "SYNs per second")
	flag.IntVar(&cfg.Count, "count", 0, "SYNs to send at most (default rate × duration)")
	flag.DurationVar(&cfg.Duration, "duration", 5*time.Second, "how long to send at most")
	flag.StringVar(&cfg.Family, "family", synload.Both, "4, 6, or both (alternately)")
	flag.IntVar(&cfg.Sources, "sources", 250, "IPv4 source addresses (127.77.0.1 onwards) taking turns")
	flag.Parse()
	if *port > 65535 {
		fmt.Fprintf(os.Stderr, "synload: -port %d: out of range\n", *port)
		os.Exit(2)
	}
	cfg.Port = uint16(*port)
	if cfg.Count == 0 {
		cfg.Count = int(float64(cfg.Rate) * cfg.Duration.Seconds())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration+10*time.Second)
	defer cancel()
	r, err := synload.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
