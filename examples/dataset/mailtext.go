package dataset

import (
	"bytes"
	"encoding/base64"
	"html"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds on the MIME walk of MessageText.
const (
	maxMIMEDepth = 5
	maxPartBytes = 1 << 20
	maxParts     = 64
)

// MessageText reduces a raw RFC 822 e-mail to "Subject: S\n\nBODY": the
// decoded subject and the message's text — the first text/plain part (or,
// failing that, the first text/html part with tags, scripts and styles
// removed), after undoing quoted-printable or base64 transfer encoding.
// Bytes that are not valid UTF-8 are read as Latin-1. Runs of blanks are
// collapsed, blank lines limited to one, and the result is cut to at most
// maxBytes bytes on a rune boundary (no limit if maxBytes <= 0). A message
// without parseable headers is treated as body only.
func MessageText(raw string, maxBytes int) string {
	var subject, body string
	msg, err := mail.ReadMessage(strings.NewReader(raw))
	if err != nil {
		body = normalizeText(toUTF8([]byte(raw)))
	} else {
		subject = msg.Header.Get("Subject")
		if dec, err := new(mime.WordDecoder).DecodeHeader(subject); err == nil {
			subject = dec
		}
		subject = strings.Join(strings.Fields(toUTF8([]byte(subject))), " ")
		b, isHTML, ok := textPart(textproto.MIMEHeader(msg.Header), msg.Body, 0)
		if ok {
			if isHTML {
				b = stripHTML(b)
			}
			body = normalizeText(b)
		}
	}
	out := "Subject: " + subject + "\n\n" + body
	out = strings.TrimRight(out, "\n ")
	return truncateUTF8(out, maxBytes)
}

// textPart returns the decoded text of the best text part of an entity.
func textPart(h textproto.MIMEHeader, body io.Reader, depth int) (text string, isHTML, ok bool) {
	ct := h.Get("Content-Type")
	mediaType, params, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil {
		mediaType = "text/plain"
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		if depth >= maxMIMEDepth || params["boundary"] == "" {
			return "", false, false
		}
		mr := multipart.NewReader(body, params["boundary"])
		var htmlText string
		haveHTML := false
		for i := 0; i < maxParts; i++ {
			p, err := mr.NextRawPart()
			if err != nil {
				break
			}
			t, isH, ok := textPart(p.Header, p, depth+1)
			if !ok {
				continue
			}
			if !isH {
				return t, false, true
			}
			if !haveHTML {
				htmlText, haveHTML = t, true
			}
		}
		return htmlText, true, haveHTML
	}
	if mediaType != "text/plain" && mediaType != "text/html" {
		return "", false, false
	}
	raw, err := io.ReadAll(io.LimitReader(body, maxPartBytes))
	if err != nil && len(raw) == 0 {
		return "", false, false
	}
	switch strings.ToLower(strings.TrimSpace(h.Get("Content-Transfer-Encoding"))) {
	case "quoted-printable":
		if dec, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(raw))); err == nil {
			raw = dec
		}
	case "base64":
		if dec, err := io.ReadAll(base64.NewDecoder(base64.StdEncoding, bytes.NewReader(bytes.TrimSpace(raw)))); err == nil {
			raw = dec
		}
	}
	return toUTF8(raw), mediaType == "text/html", true
}

// toUTF8 returns b as a string, reading it as Latin-1 if it is not UTF-8.
func toUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	r := make([]rune, len(b))
	for i, c := range b {
		r[i] = rune(c)
	}
	return string(r)
}

// stripHTML removes tags, comments, scripts and styles and unescapes
// entities; block-level tags become line breaks.
func stripHTML(s string) string {
	var out strings.Builder
	lower := strings.ToLower(s)
	for i := 0; i < len(s); {
		if s[i] != '<' {
			j := strings.IndexByte(s[i:], '<')
			if j < 0 {
				j = len(s) - i
			}
			out.WriteString(s[i : i+j])
			i += j
			continue
		}
		if strings.HasPrefix(lower[i:], "<!--") {
			end := strings.Index(lower[i+4:], "-->")
			if end < 0 {
				break
			}
			i += 4 + end + 3
			continue
		}
		skipped := false
		for _, tag := range []string{"script", "style"} {
			if strings.HasPrefix(lower[i+1:], tag) {
				end := strings.Index(lower[i:], "</"+tag)
				if end < 0 {
					i = len(s)
				} else {
					i += end + 2
				}
				skipped = true
				break
			}
		}
		if skipped {
			if k := strings.IndexByte(s[i:], '>'); k >= 0 {
				i += k + 1
			} else {
				i = len(s)
			}
			continue
		}
		k := strings.IndexByte(s[i:], '>')
		if k < 0 {
			break
		}
		name := strings.TrimLeft(lower[i+1:i+k], "/")
		if n := strings.IndexFunc(name, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }); n >= 0 {
			name = name[:n]
		}
		switch name {
		case "br", "p", "div", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "table", "title":
			out.WriteByte('\n')
		default:
			out.WriteByte(' ')
		}
		i += k + 1
	}
	return html.UnescapeString(out.String())
}

// normalizeText drops control characters, collapses runs of blanks to one
// space, trims lines and keeps at most one empty line in a row.
func normalizeText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	lines := strings.Split(s, "\n")
	var out []string
	blank := true // suppresses leading empty lines
	for _, l := range lines {
		l = strings.Join(strings.FieldsFunc(l, func(r rune) bool {
			return unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError
		}), " ")
		if l == "" {
			if !blank {
				out = append(out, "")
			}
			blank = true
			continue
		}
		out = append(out, l)
		blank = false
	}
	return strings.TrimRight(strings.Join(out, "\n"), "\n")
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
