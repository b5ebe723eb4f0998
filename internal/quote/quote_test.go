package quote

import "testing"

func TestText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/grpc.testing.ReconnectService/Start", "/grpc.testing.ReconnectService/Start"},
		{"too_many_pings", "too_many_pings"},
		{"café, 東京, \"quoted\"", "café, 東京, \"quoted\""},
		{"", ""},
		{"/x\x1b[2J", `"/x\x1b[2J"`},
		{"\x1b]0;title\a", `"\x1b]0;title\a"`},
		{"/ok\r\nverdict: no problem found", `"/ok\r\nverdict: no problem found"`},
		{"tab\there", `"tab\there"`},
		{"right-to-left \u202e override", `"right-to-left \u202e override"`},
		{"not UTF-8 \xff", `"not UTF-8 \xff"`},
		{"é and \x00", `"\u00e9 and \x00"`},
	}
	for _, tt := range tests {
		if got := Text(tt.in); got != tt.want {
			t.Errorf("Text(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
