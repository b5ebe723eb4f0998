package main

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/backoff-audit/audit/auditrun"
	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/interop"
	"github.com/backoff-audit/audit/server"
	"github.com/backoff-audit/audit/watch"
)

// flagValues parses args with the flags of verb and returns every flag's
// value.
func flagValues(t *testing.T, verb string, args ...string) map[string]string {
	t.Helper()
	cmd, _, err := newRootCmd().Find([]string{verb})
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatalf("audit %s %s: %v", verb, strings.Join(args, " "), err)
	}
	vals := map[string]string{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) { vals[f.Name] = f.Value.String() })
	return vals
}

// TestFlagSpellings: a flag spelt with dashes, a former name, a short form
// and a flag in milliseconds set what their flag sets.
func TestFlagSpellings(t *testing.T) {
	tests := []struct {
		verb        string
		alias, flag []string
	}{
		{"pcap", []string{"--max-backoff", "2s"}, []string{"--max_backoff", "2s"}},
		{"pcap", []string{"--initial-backoff=3s", "--min-connect-timeout=5s"}, []string{"--initial_backoff=3s", "--min_connect_timeout=5s"}},
		{"pcap", []string{"--retry-mode", "hang", "--control-port", "8080"}, []string{"--retry_mode", "hang", "--control_port", "8080"}},
		{"pcap", []string{"--server-log=r.jsonl"}, []string{"--record=r.jsonl"}},
		{"pcap", []string{"-v"}, []string{"--verbose"}},
		{"live", []string{"--min_connect_timeout_ms", "3000"}, []string{"--min_connect_timeout", "3s"}},
		{"live", []string{"--max_reconnect_backoff_ms=2000"}, []string{"--max_backoff=2s"}},
		{"live", []string{"--retry-port", "9", "--server_log", "r.jsonl"}, []string{"--retry_port", "9", "--record", "r.jsonl"}},
		{"h2", []string{"--retry-max-attempts", "3", "--retry-tolerance", "1s"}, []string{"--retry_max_attempts", "3", "--retry_tolerance", "1s"}},
		{"h2", []string{"--port", "80", "--port", "443"}, []string{"--port", "80,443"}},
		{"server", []string{"--control-port=5", "--min-connect-timeout-ms=100"}, []string{"--control_port=5", "--min_connect_timeout_ms=100"}},
		{"client", []string{"--server-control-port", "1", "--use-tls=false"}, []string{"--server_control_port", "1", "--use_tls=false"}},
	}
	for _, tt := range tests {
		name := tt.verb + " " + strings.Join(tt.alias, " ")
		if diff := cmp.Diff(flagValues(t, tt.verb, tt.flag...), flagValues(t, tt.verb, tt.alias...)); diff != "" {
			t.Errorf("audit %s: flags (-%s +alias):\n%s", name, strings.Join(tt.flag, " "), diff)
		}
	}
}

// TestHelpFlags: every verb lists its flags with underscores, and no
// alias; its help says which spellings are aliases; no default shown is
// other than what leaving the flag out does. audit server's explains every
// retry mode, and every writer of a key log says that the file holds
// secrets.
func TestHelpFlags(t *testing.T) {
	const secrets = "it holds secrets, mode 0600"
	tests := []struct {
		verb         string
		says, lacks  []string // in the whole help; in the list of flags
		defaultsEnds string   // every "(default …)" in the list ends so, when set
	}{
		{verb: "", says: []string{"the same name with dashes (--retry-port) is\naccepted too"}},
		{verb: "pcap", says: []string{"--server_log is a former name of --record", "--retry_mode MODE", "(default: read from the attempts' fates)"},
			lacks: []string{"(default close)", "server_log"}},
		{verb: "live", says: []string{"--min_connect_timeout_ms and --max_reconnect_backoff_ms, in milliseconds", "--min_connect_timeout duration", "(default 20s)",
			"--attach --control_port=P", "--keylog FILE", secrets},
			lacks: []string{"--min_connect_timeout_ms", "--max_reconnect_backoff_ms", "(default 0s)", "server_log"}},
		{verb: "h2", says: []string{"--keylog FILE", "NODE_OPTIONS=--tls-keylog=FILE"}, lacks: []string{"(default 100ms)"}},
		{verb: "server", says: []string{"--control_port port", "--min_connect_timeout_ms int", "--retry_mode", "--max_held", "--tls_cert", "--tls_key",
			"  close ", "  refuse ", "  hang ", "  restart=D ", "  settings-close ", "  goaway ", "passed=false", "--keylog FILE", secrets}},
		{verb: "watch", says: []string{"--initial_backoff duration", "(default 1s)", "--infer_every"}, lacks: []string{"session's own"}},
		{verb: "client", says: []string{"--server_control_port port", "--max_reconnect_backoff_ms int32", "--keylog FILE", secrets}},
	}
	policy := regexp.MustCompile(`(?m)^ +--(initial_backoff|multiplier|jitter|max_backoff|min_connect_timeout|tolerance) .*\(default [^,]+, or each session's own\)$`)
	for _, tt := range tests {
		code, help, stderr := runAudit(t, strings.Fields(tt.verb+" --help")...)
		_, list, ok := strings.Cut(help, "\nFlags:\n")
		if code != exitOK || !ok {
			t.Fatalf("audit %s --help: exit %d, no list of flags\n%s%s", tt.verb, code, help, stderr)
		}
		if m := regexp.MustCompile(`--[a-z0-9]+-[a-z0-9-]*`).FindString(list); m != "" {
			t.Errorf("audit %s --help lists %s: a flag spelt with dashes", tt.verb, m)
		}
		for _, w := range tt.says {
			if !strings.Contains(help, w) {
				t.Errorf("audit %s --help lacks %q", tt.verb, w)
			}
		}
		for _, w := range tt.lacks {
			if strings.Contains(list, w) {
				t.Errorf("audit %s --help lists %q", tt.verb, w)
			}
		}
		if n := len(policy.FindAllString(list, -1)); tt.verb == "pcap" && n != len(policyFlags) {
			t.Errorf("audit pcap --help: %d of the %d policy flags say the sessions' own policy is their default:\n%s", n, len(policyFlags), list)
		}
	}
}

// TestPortFlags: a port out of range is one message on every verb, naming
// the flag and its range.
func TestPortFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"pcap", "--port", "70000", "x.pcap"}, "--port 70000: not a port (1–65535)"},
		{[]string{"pcap", "--port", "0", "x.pcap"}, "--port 0: not a port (1–65535)"},
		{[]string{"h2", "--port", "0", "x.pcap"}, "--port 0: not a port (1–65535)"},
		{[]string{"client", "--server_control_port=70000", "--server_retry_port=1"}, "--server_control_port 70000: not a port (1–65535)"},
		{[]string{"pcap", "--control_port=0", "x.pcap"}, "--control_port 0: not a port (1–65535)"},
		{[]string{"h2", "--port", "65536", "x.pcap"}, "--port 65536: not a port (1–65535)"},
		{[]string{"server", "--control_port", "70000"}, "--control_port 70000: not a port (0–65535)"},
		{[]string{"live", "--retry_port=-1"}, "--retry_port -1: not a port (0–65535)"},
		{[]string{"client", "--server_control_port=1", "--server_retry_port=http"}, "--server_retry_port http: not a port (1–65535)"},
	} {
		code, _, stderr := runAudit(t, tt.args...)
		if want := "audit: " + tt.want + "\n"; code != exitUsage || stderr != want {
			t.Errorf("audit %s: exit %d, stderr %q; want %d, %q", strings.Join(tt.args, " "), code, stderr, exitUsage, want)
		}
	}
}

// TestFieldFlags: the fields a verb's Annotations map are fields of the
// configurations it fills, and their flags are its flags.
func TestFieldFlags(t *testing.T) {
	configs := map[string][]any{
		"server": {server.Flags{}, server.Config{}},
		"live":   {server.Flags{}, server.Config{}, auditrun.Config{}},
		"pcap":   {auditrun.FilesConfig{}},
		"h2":     {flows.AuditOptions{}},
		"client": {interop.Config{}},
		"watch":  {watch.Config{}},
	}
	for _, cmd := range newRootCmd().Commands() {
		for fieldName, flag := range cmd.Annotations {
			if cmd.Flags().Lookup(flag) == nil {
				t.Errorf("audit %s: field %s maps to --%s, not a flag of it", cmd.Name(), fieldName, flag)
			}
			found := false
			for _, c := range configs[cmd.Name()] {
				v := reflect.ValueOf(c)
				for _, name := range strings.Split(fieldName, ".") {
					if v.Kind() == reflect.Pointer {
						v = reflect.Zero(v.Type().Elem())
					}
					if v.Kind() == reflect.Struct {
						v = v.FieldByName(name)
					}
				}
				found = found || v.IsValid()
			}
			if !found {
				t.Errorf("audit %s: %s is a field of none of its configurations", cmd.Name(), fieldName)
			}
		}
	}
}

// TestOutcomeError: what a run judged becomes the exit status and the
// last line.
func TestOutcomeError(t *testing.T) {
	tests := []struct {
		o    auditrun.Outcome
		err  error
		code int
		msg  string
	}{
		{o: auditrun.Outcome{Sessions: 2}, code: exitOK},
		{err: errors.New("open capture: no such device"), code: exitUsage, msg: "open capture: no such device"},
		{o: auditrun.Outcome{Verdict: "FAIL: 1 peer: 0 passed, 1 failed"}, code: exitFail, msg: "FAIL: 1 peer: 0 passed, 1 failed"},
		{o: auditrun.Outcome{Sessions: 2, Failed: 1, FirstFailure: "session 2: server verdict failed, kernel passed: interval 5: 3301 ms is late"},
			code: exitFail, msg: "1 of 2 sessions failed; session 2: server verdict failed, kernel passed: interval 5: 3301 ms is late"},
	}
	for _, tt := range tests {
		err := outcomeError(tt.o, tt.err)
		var ee *exitError
		var got struct {
			Code int
			Msg  string
		}
		if errors.As(err, &ee) {
			got.Code, got.Msg = ee.code, ee.Error()
		}
		if diff := cmp.Diff(struct {
			Code int
			Msg  string
		}{tt.code, tt.msg}, got); diff != "" {
			t.Errorf("outcomeError(%+v, %v) (-want +got):\n%s", tt.o, tt.err, diff)
		}
	}
}
