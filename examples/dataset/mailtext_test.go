package dataset

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMessageText(t *testing.T) {
	tests := []struct {
		name, raw string
		max       int
		want      string
	}{
		{"plain", "From: a@b\nSubject: Hello   there\n\nLine one\n\n\n\nLine   two\n", 0,
			"Subject: Hello there\n\nLine one\n\nLine two"},
		{"crlf", "Subject: x\r\n\r\nbody\r\nmore\r\n", 0, "Subject: x\n\nbody\nmore"},
		{"quoted-printable", "Subject: q\nContent-Transfer-Encoding: quoted-printable\n\ncaf=C3=A9 =3D soft=\nbreak\n", 0,
			"Subject: q\n\ncafé = softbreak"},
		{"base64", "Subject: b\nContent-Transfer-Encoding: base64\n\naGVsbG8g\nd29ybGQ=\n", 0, "Subject: b\n\nhello world"},
		{"encoded subject", "Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\n\nx\n", 0, "Subject: Grüße\n\nx"},
		{"latin-1", "Subject: l\n\nna\xefve\n", 0, "Subject: l\n\nnaïve"},
		{"multipart prefers plain", "Subject: m\nContent-Type: multipart/alternative; boundary=XX\n\n" +
			"--XX\nContent-Type: text/html\n\n<p>html</p>\n--XX\nContent-Type: text/plain\n\nplain text\n--XX--\n", 0,
			"Subject: m\n\nplain text"},
		{"html only", "Subject: h\nContent-Type: text/html\n\n<html><head><style>p{color:red}</style><script>var x=1;</script></head>" +
			"<body><!-- hidden --><p>Hi&amp;bye</p><a href='u'>link</a><br>next</body></html>\n", 0,
			"Subject: h\n\nHi&bye\nlink\nnext"},
		{"nested multipart", "Subject: n\nContent-Type: multipart/mixed; boundary=A\n\n--A\nContent-Type: multipart/alternative; boundary=B\n\n" +
			"--B\nContent-Type: text/plain\n\ninner\n--B--\n--A\nContent-Type: application/pdf\n\n%PDF\n--A--\n", 0,
			"Subject: n\n\ninner"},
		{"no text part", "Subject: p\nContent-Type: image/png\n\n\x89PNG\n", 0, "Subject: p"},
		{"no headers", "just a body line\nand another", 0, "Subject: \n\njust a body line\nand another"},
		{"truncate on rune boundary", "Subject: t\n\néééé\n", 16, "Subject: t\n\néé"},
		{"truncate mid rune", "Subject: t\n\néééé\n", 15, "Subject: t\n\né"},
	}
	for _, tc := range tests {
		got := MessageText(tc.raw, tc.max)
		if got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestTruncateUTF8(t *testing.T) {
	for n := 0; n < 12; n++ {
		s := truncateUTF8("aé漢字b", n)
		if !utf8.ValidString(s) || (n > 0 && len(s) > n) || !strings.HasPrefix("aé漢字b", s) {
			t.Errorf("truncateUTF8(%d) = %q", n, s)
		}
	}
}
