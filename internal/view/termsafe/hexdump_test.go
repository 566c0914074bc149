package termsafe

import (
	"strings"
	"testing"
)

func TestHexDump(t *testing.T) {
	t.Parallel()
	payload := []byte("{\"reservation_id\":\"r-8421\",\"attempt\":2}\n\x1b[2J\x00\xff")
	tests := []struct {
		name          string
		in            []byte
		max           int
		want          string
		wantTruncated bool
	}{
		{name: "empty", in: nil, want: ""},
		{
			// Byte for byte what `hexdump -C` prints for the same input.
			name: "partial last line",
			in:   payload,
			want: `00000000  7b 22 72 65 73 65 72 76  61 74 69 6f 6e 5f 69 64  |{"reservation_id|
00000010  22 3a 22 72 2d 38 34 32  31 22 2c 22 61 74 74 65  |":"r-8421","atte|
00000020  6d 70 74 22 3a 32 7d 0a  1b 5b 32 4a 00 ff        |mpt":2}..[2J..|
0000002e
`,
		},
		{
			name: "whole line",
			in:   []byte("0123456789abcdef"),
			want: `00000000  30 31 32 33 34 35 36 37  38 39 61 62 63 64 65 66  |0123456789abcdef|
00000010
`,
		},
		{
			// Same as `hexdump -C -n 20`.
			name:          "truncated",
			in:            payload,
			max:           20,
			wantTruncated: true,
			want: `00000000  7b 22 72 65 73 65 72 76  61 74 69 6f 6e 5f 69 64  |{"reservation_id|
00000010  22 3a 22 72                                       |":"r|
00000014
`,
		},
		{name: "max equals length", in: []byte("ab"), max: 2, want: "00000000  61 62                                             |ab|\n00000002\n"},
		{name: "C1 and DEL as dots", in: []byte("\u009b\x7f~ "), want: "00000000  c2 9b 7f 7e 20                                    |...~ |\n00000005\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, truncated := HexDump(tt.in, tt.max)
			if got != tt.want || truncated != tt.wantTruncated {
				t.Errorf("HexDump(%q, %d) =\n%s(truncated %v), want\n%s(truncated %v)", tt.in, tt.max, got, truncated, tt.want, tt.wantTruncated)
			}
		})
	}
}

func TestHexDumpIsPrintable(t *testing.T) {
	t.Parallel()
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	dump, _ := HexDump(all, 0)
	for i := 0; i < len(dump); i++ {
		if c := dump[i]; c != '\n' && (c < 0x20 || c >= 0x7f) {
			t.Fatalf("dump holds byte %#x at %d", c, i)
		}
	}
	if lines := strings.Count(dump, "\n"); lines != 17 {
		t.Errorf("dump of 256 bytes has %d lines, want 17", lines)
	}
}

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
