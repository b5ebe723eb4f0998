package arena

import (
	"fmt"
	"testing"
)

// TestMake: the arrays are zeroed and writable, and only pointer-free
// element types are taken.
func TestMake(t *testing.T) {
	type plain struct {
		a [16]byte
		b int64
		c [2]struct{ x, y uint16 }
	}
	tests := []struct {
		name  string
		make  func() error
		panic bool
	}{
		{"bytes", func() error { return check(Make[byte](5 << 20)) }, false},
		{"struct", func() error { return check(Make[plain](1000)) }, false},
		{"empty", func() error { return check(Make[uint64](0)) }, false},
		{"pointer", func() error { Make[*int](1); return nil }, true},
		{"string", func() error { Make[struct{ s string }](1); return nil }, true},
		{"slice in an array", func() error { Make[[2][]byte](1); return nil }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if r := recover(); (r != nil) != tt.panic {
					t.Errorf("panic %v, want one: %v", r, tt.panic)
				}
			}()
			if err := tt.make(); err != nil {
				t.Error(err)
			}
		})
	}
}

// check requires s zeroed, writes every element and gives s back.
func check[T comparable](s []T) error {
	defer Free(s)
	var zero, one T
	for i := range s {
		if s[i] != zero {
			return fmt.Errorf("element %d of %d not zero", i, len(s))
		}
		s[i] = one
	}
	return nil
}
