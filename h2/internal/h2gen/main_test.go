package main

import (
	"context"
	"net"
	"testing"
	"time"
)

// TestRetries runs the retry fixture's stacks without the capture: every
// call ends as retryPlan says (runRetries checks each status).
func TestRetries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var addr string
	if err := runRetries(ctx, func(ln net.Listener) error { addr = ln.Addr().String(); return nil }); err != nil {
		t.Fatal(err)
	}
	if addr == "" {
		t.Error("runRetries did not hand its listener over before serving")
	}
}
