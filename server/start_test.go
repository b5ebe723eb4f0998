package server

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/session"
)

// TestStartRefuses: Starts that could never work are answered at once with
// their own code, and leave the running session and the record as they
// were.
func TestStartRefuses(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		// setup runs before the refused Start; it may start a session.
		setup func(t *testing.T, h *harness)
		start func(ctx context.Context, h *harness) error
		code  codes.Code
		// words must be in the error's message.
		words []string
		// starts is how many start lines the record holds in the end.
		starts int
	}{
		{
			name: "negative max_reconnect_backoff_ms",
			start: func(ctx context.Context, h *harness) error {
				_, err := h.rpc.Start(ctx, &pb.ReconnectParams{MaxReconnectBackoffMs: -1})
				return err
			},
			code:   codes.InvalidArgument,
			words:  []string{"max_reconnect_backoff_ms", "-1"},
			starts: 0,
		},
		{
			name: "beyond max_waiting",
			cfg:  Config{MaxWaiting: 2},
			setup: func(t *testing.T, h *harness) {
				h.startSession(0)
				for range 2 {
					other := h.client("127.0.0.1")
					go other.Start(h.ctx, &pb.ReconnectParams{}) // answered UNAVAILABLE at Close
				}
				h.waitFor("two Starts to wait", func() bool { return h.s.waiting.Load() == 2 })
			},
			start: func(ctx context.Context, h *harness) error {
				_, err := h.client("127.0.0.1").Start(ctx, &pb.ReconnectParams{})
				return err
			},
			code:   codes.ResourceExhausted,
			words:  []string{"max_waiting 2"},
			starts: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec testutil.SyncBuffer
			cfg := tt.cfg
			cfg.Record = &rec
			h := start(t, cfg)
			if tt.setup != nil {
				tt.setup(t, h)
			}
			// Far shorter than the session timeout: "at once" means the
			// Start is not left waiting.
			ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
			defer cancel()
			err := tt.start(ctx, h)
			if status.Code(err) != tt.code {
				t.Fatalf("Start: %v, want %v", err, tt.code)
			}
			for _, w := range tt.words {
				if !strings.Contains(status.Convert(err).Message(), w) {
					t.Errorf("message %q does not say %q", status.Convert(err).Message(), w)
				}
			}
			if got := h.s.waiting.Load(); tt.cfg.MaxWaiting > 0 && int(got) != tt.cfg.MaxWaiting {
				t.Errorf("%d Starts waiting after the refusal, want %d", got, tt.cfg.MaxWaiting)
			}
			if err := h.s.Close(); err != nil {
				t.Fatal(err)
			}
			events, err := session.ReadRecord(bytes.NewReader(rec.Bytes()))
			if err != nil {
				t.Fatalf("the record does not read back: %v", err)
			}
			starts := 0
			for _, e := range events {
				if e.Event == session.EventStart {
					starts++
				}
			}
			if starts != tt.starts {
				t.Errorf("record has %d start lines, want %d (the refused Start must not add one)", starts, tt.starts)
			}
		})
	}
}

// TestWaitingBoundFreesUp: once a waiting Start is served or gone, another
// may wait in its place.
func TestWaitingBoundFreesUp(t *testing.T) {
	h := start(t, Config{MaxWaiting: 1})
	h.startSession(0)
	a, b, c := h.client("127.0.0.1"), h.client("127.0.0.1"), h.client("127.0.0.1")
	ctx, cancel := context.WithCancel(h.ctx)
	first := make(chan error, 1)
	go func() {
		_, err := a.Start(ctx, &pb.ReconnectParams{})
		first <- err
	}()
	h.waitFor("a Start to wait", func() bool { return h.s.waiting.Load() == 1 })
	if _, err := b.Start(h.ctx, &pb.ReconnectParams{}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("Start beyond the bound: %v, want ResourceExhausted", err)
	}
	cancel()
	if err := recv(h, first); status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled Start: %v", err)
	}
	h.waitFor("the cancelled Start to go", func() bool { return h.s.waiting.Load() == 0 })
	second := make(chan error, 1)
	go func() {
		_, err := c.Start(h.ctx, &pb.ReconnectParams{})
		second <- err
	}()
	h.waitFor("another Start to wait", func() bool { return h.s.waiting.Load() == 1 })
	h.stop()
	if err := recv(h, second); err != nil {
		t.Fatalf("Start that waited within the bound: %v", err)
	}
	h.stop()
}
