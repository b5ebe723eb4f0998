package text

import (
	"testing"
	"time"
)

func TestSpan(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{201*time.Microsecond + 400, "201µs"},
		{12345678 * time.Nanosecond, "12.346ms"},
		{6005257 * time.Microsecond, "6.005s"},
		{-1500 * time.Microsecond, "-1.5ms"},
		{90 * time.Minute, "1h30m0s"},
	}
	for _, tt := range tests {
		if got := Span(tt.d); got != tt.want {
			t.Errorf("Span(%d) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 probes", 1: "1 probe", 2: "2 probes"} {
		if got := Plural(n, "probe"); got != want {
			t.Errorf("Plural(%d) = %q, want %q", n, got, want)
		}
	}
}
