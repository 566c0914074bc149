package termsafe

import (
	"testing"
)

func TestIsText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []byte
		want bool
	}{
		{name: "empty", in: nil, want: true},
		{name: "json", in: []byte(`{"reservation_id":"r-8421","expected_version":3}`), want: true},
		{name: "multi-line text with tabs and CRLF", in: []byte("line 1\r\n\tline 2\f"), want: true},
		{name: "unicode", in: []byte("Zürich → 東京"), want: true},
		{name: "one escape in a long message", in: []byte("\x1b[31mdeadline exceeded while expiring r-8421\x1b[0m"), want: true},
		{name: "NUL", in: []byte("abc\x00def"), want: false},
		{name: "invalid utf-8", in: []byte("abc\xff"), want: false},
		{name: "gzip header", in: []byte{0x1f, 0x8b, 0x08, 0x00}, want: false},
		{name: "mostly controls", in: []byte("\x01\x02\x03abc"), want: false},
		{name: "C1 controls count", in: []byte("\u009b\u009b\u009babcdef"), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := IsText(tt.in); got != tt.want {
				t.Errorf("IsText(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
