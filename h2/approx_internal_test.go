package h2

import (
	"testing"
	"time"
)

func TestApprox(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0 ms"},
		{400 * time.Microsecond, "0.4 ms"},
		{1800 * time.Microsecond, "1.8 ms"},
		{12 * time.Millisecond, "12 ms"},
		{299600 * time.Microsecond, "300 ms"},
		{2004 * time.Millisecond, "2 s"},
		{2500 * time.Millisecond, "2.5 s"},
		{10 * time.Second, "10 s"},
		{-3 * time.Millisecond, "-3 ms"},
	}
	for _, tt := range tests {
		if got := approx(tt.d); got != tt.want {
			t.Errorf("approx(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
