// Package capture turns packet captures into TCP SYN events for the
// auditor (docs/spec.md §5): classic pcap, pcapng and gzip-compressed files
// here, a live libpcap source beside them. It is the only package that
// imports gopacket.
//
// Every byte it reads is untrusted. Lengths from a file never size an
// allocation: records are read into one bounded buffer (see maxRecord), and
// every loop is bounded by the bytes present.
package capture
