package wordpiece

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// BasicTokenize splits text into words and punctuation as BERT's
// BasicTokenizer does: it removes NUL, U+FFFD and control characters, maps
// whitespace to spaces, puts spaces around CJK ideographs, splits on
// whitespace, lower-cases and strips accents (NFD, then dropping
// non-spacing marks) when lowerCase is set, and splits every punctuation
// character into its own token.
func BasicTokenize(text string, lowerCase bool) []string {
	var b strings.Builder
	b.Grow(len(text) + 8)
	for _, r := range text {
		if r < utf8.RuneSelf { // ASCII fast path, same classes as below
			switch {
			case r == ' ' || r == '\t' || r == '\n' || r == '\r':
				b.WriteByte(' ')
			case r < 0x20 || r == 0x7F:
			default:
				b.WriteByte(byte(r))
			}
			continue
		}
		switch {
		case r == 0 || r == unicode.ReplacementChar || isControl(r):
			continue
		case isWhitespace(r):
			b.WriteByte(' ')
		case isCJK(r):
			b.WriteByte(' ')
			b.WriteRune(r)
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	var out []string
	for _, tok := range strings.Fields(b.String()) {
		if lowerCase {
			tok = stripAccents(strings.ToLower(tok))
		}
		out = splitPunct(tok, out)
	}
	return out
}

// isWhitespace reports BERT's whitespace: space, tab, newline, carriage
// return and the Unicode category Zs.
func isWhitespace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || unicode.Is(unicode.Zs, r)
}

// isControl reports BERT's control characters: Unicode category C* (which in
// Python includes unassigned code points), except tab, newline and carriage
// return, which count as whitespace.
func isControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	if unicode.In(r, unicode.C) {
		return true
	}
	return !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z)
}

// isPunct reports BERT's punctuation: all non-letter, non-digit printable
// ASCII (33–47, 58–64, 91–96, 123–126) and the Unicode categories P*.
func isPunct(r rune) bool {
	if (r >= 33 && r <= 47) || (r >= 58 && r <= 64) || (r >= 91 && r <= 96) || (r >= 123 && r <= 126) {
		return true
	}
	return unicode.In(r, unicode.P)
}

// isCJK reports code points of the CJK Unified Ideographs blocks that BERT
// treats as words of their own.
func isCJK(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) || (r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) || (r >= 0x2B820 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) || (r >= 0x2F800 && r <= 0x2FA1F)
}

// stripAccents decomposes s (NFD) and drops non-spacing marks.
func stripAccents(s string) string {
	if isASCII(s) {
		return s
	}
	d := norm.NFD.String(s)
	var b strings.Builder
	b.Grow(len(d))
	for _, r := range d {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// splitPunct appends to out the pieces of tok, each punctuation character
// becoming its own piece.
func splitPunct(tok string, out []string) []string {
	start := 0
	for i, r := range tok {
		if isPunct(r) {
			if i > start {
				out = append(out, tok[start:i])
			}
			n := i + len(string(r))
			out = append(out, tok[i:n])
			start = n
		}
	}
	if start < len(tok) {
		out = append(out, tok[start:])
	}
	return out
}

// isASCII reports whether s is all ASCII.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
