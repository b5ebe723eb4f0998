package server

import (
	"net"
	"testing"
	"time"
)

// A control connection whose handshake fails (a client that sends garbage
// and goes) is not kept by the listener after gRPC closed it.
func TestControlListenerForgetsClosed(t *testing.T) {
	srv, err := New(Config{RetryAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for range 20 {
		c, err := net.Dial("tcp", srv.ControlAddr())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("GET / HTTP/1.0\r\n\r\n")) // not HTTP/2: gRPC drops it
		c.Close()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		srv.control.mu.Lock()
		n := len(srv.control.handshaking)
		srv.control.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d failed control connections still held after 10 s", n)
		}
	}
}
