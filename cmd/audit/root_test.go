package main

import (
	"strings"
	"testing"
)

func TestRoot(t *testing.T) {
	verbs := []string{"audit server", "audit client", "audit live", "audit pcap"}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		// wantOut and wantErr are texts stdout and stderr must hold.
		wantOut, wantErr []string
	}{
		{name: "no verb prints help and fails", args: nil, wantCode: exitUsage,
			wantErr: append([]string{"no verb given"}, verbs...)},
		{name: "help names every verb", args: []string{"--help"}, wantCode: exitOK, wantOut: verbs},
		{name: "version", args: []string{"--version"}, wantCode: exitOK, wantOut: []string{"audit "}},
		{name: "-v is not the version (it is pcap's --verbose)", args: []string{"-v"}, wantCode: exitUsage, wantErr: []string{"unknown shorthand flag: 'v'"}},
		{name: "unknown verb", args: []string{"frobnicate"}, wantCode: exitUsage, wantErr: []string{"unknown command"}},
		{name: "live's interface has a default", args: []string{"live", "--help"}, wantCode: exitOK,
			wantOut: []string{"live [--iface IFACE]", `--iface string`, `(default "lo")`}},
		{name: "the record flag's former name still works", args: []string{"pcap", "--server-log=/nonexistent/record.jsonl", fixture("real-grpc-go.pcap")},
			wantCode: exitUsage, wantErr: []string{"--record", "/nonexistent/record.jsonl"}},
		{name: "--peer does not go with --record", args: []string{"pcap", "--record=x.jsonl", "--peer=127.0.0.1", fixture("real-grpc-go.pcap")},
			wantCode: exitUsage, wantErr: []string{"--peer: not with --record"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runAudit(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d; want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout, stderr)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}
