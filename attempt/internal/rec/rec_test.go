package rec

import (
	"net/netip"
	"testing"

	"github.com/backoff-audit/audit/backoff"
)

func TestPayloadCodes(t *testing.T) {
	for i, p := range codeNames {
		if c := CodeOf(p); int(c) != i || c.Payload() != p {
			t.Errorf("CodeOf(%q) = %d (%q), want %d", p, c, c.Payload(), i)
		}
	}
	for _, p := range []backoff.Payload{"tls xxxxxx hello", "something else", "PRI * HTTP/2.1", "x"} {
		if c := CodeOf(p); c.Payload() != backoff.PayloadOther {
			t.Errorf("CodeOf(%q) = %q, want data", p, c.Payload())
		}
	}
}

func TestWordsOf(t *testing.T) {
	for _, s := range []string{"10.1.2.3", "::ffff:10.1.2.3", "fd00::1:2", "::1", "fe80::1%eth0", "255.255.255.255"} {
		a := netip.MustParseAddr(s)
		b := a.As16()
		if got, want := WordsOf(a), Words(&b); got != want {
			t.Errorf("WordsOf(%s) = %x, want %x", s, got, want)
		}
		if got := WordsOf(a).Bytes(); got != b {
			t.Errorf("bytes of WordsOf(%s) = %x, want %x", s, got, b)
		}
	}
	if WordsOf(netip.Addr{}) != (Addr128{}) {
		t.Error("the zero Addr is not zero")
	}
}
