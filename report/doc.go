// Package report writes what a reading of captures concludes, as text for
// a person and JSON for a program, from the same values: the peer audit of
// a capture (every chain's verdict, the summary, the herd), and the
// sections a session adds (the session, the live capture's counters, the
// server's verdict, the cross-check) or a record file adds (its sessions).
// Package html writes the same as one page.
package report
