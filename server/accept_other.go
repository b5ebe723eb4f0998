//go:build !linux

package server

import (
	"errors"
	"net"
	"time"
)

// initRetry has nothing to prepare: without accept4 on the listener's
// descriptor, the accept loop uses Accept.
func (s *Server) initRetry() error { return nil }

// acceptLoop accepts, stamps and closes every retry connection until the
// listener is closed. Here a connection accepted just before a Stop may
// still be stamped after it; the Linux loop takes connections under
// acceptMu and has no such window.
func (s *Server) acceptLoop() {
	var delay time.Duration
	for {
		c, err := s.retry.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ok bool
			if delay, ok = s.acceptBackoff(delay, err); !ok {
				return
			}
			continue
		}
		delay = 0
		s.acceptMu.Lock()
		var hc *heldConn
		if !s.retryDone {
			hc = s.take(addrPortOf(c.RemoteAddr()))
		}
		if hc != nil {
			s.serveHeld(hc, c)
		} else {
			c.Close()
		}
		s.acceptMu.Unlock()
	}
}

// canStopListening: here the refuse and restart modes are refused.
const canStopListening = false

func (s *Server) portDownLocked() error {
	return errors.New("the retry port can stop listening on Linux only")
}

func (s *Server) portUpLocked() error { return nil }

// drainQueueLocked takes nothing: connections are only taken by the accept
// loop here.
func (s *Server) drainQueueLocked() {}

// descriptorLimit is unknown here: the control port keeps its bound as
// configured.
func descriptorLimit() int { return 0 }

// closeSpare has nothing to close: no spare descriptor is kept here.
func (s *Server) closeSpare() {}
