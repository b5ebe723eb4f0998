package analyze

import (
	"bufio"
	"io"
	"time"
)

// Summarize counts peers by verdict, as a report's summary does.
func Summarize(peers []PeerReport) Summary { return summarize(peers) }

// WritePeersText writes each peer's header line and interval table, as
// WriteText does between the capture header and the summary line.
func (r Report) WritePeersText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	var b []byte
	for _, p := range r.Peers {
		b = append(b[:0], '\n')
		bw.Write(appendPeerText(b, p))
	}
	return bw.Flush()
}

// Overlaps reports whether the session could hold attempts seen between
// first and last on port: its time span meets [first, last], and the
// record names port as the retry port or names none.
func (s ServerSession) Overlaps(port uint16, first, last time.Time) bool {
	if s.RetryPort != 0 && s.RetryPort != port {
		return false
	}
	return !s.Start.After(last) && (s.EndTime.IsZero() || !s.EndTime.Before(first))
}
