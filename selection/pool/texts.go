package pool

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/selectformer/selectformer/internal/strictjson"
)

// TextsFormat is the header's "format" value of the text format.
const TextsFormat = "selectformer-texts/1"

// headerHint says what to do about a text file without a valid header.
const headerHint = `a text pool starts with the header line {"format":"` + TextsFormat + `"}: add it as line 1, ` +
	`or build the pool from a CSV, TSV or plain-text file with "mkpool texts" (examples/mkpool)`

// utf8BOM may start a text file; it is skipped.
const utf8BOM = "\xef\xbb\xbf"

// Texts is a set of texts. A labelled set has ClassNames and one label per
// text, an index into ClassNames; an unlabeled one has neither.
type Texts struct {
	Texts      []string
	Labels     []int
	ClassNames []string
}

// Len returns the number of texts.
func (s *Texts) Len() int { return len(s.Texts) }

// Labelled reports whether the set carries labels.
func (s *Texts) Labelled() bool { return len(s.ClassNames) > 0 }

// textsHeader is the first line of the text format.
type textsHeader struct {
	Format     string   `json:"format"`
	ClassNames []string `json:"class_names,omitempty"`
}

// textRecord is one line after the header, as written.
type textRecord struct {
	Label *int   `json:"label,omitempty"`
	Text  string `json:"text"`
}

// textLine is one line after the header, as read: a missing "text" is an
// error, not an empty text.
type textLine struct {
	Label *int    `json:"label"`
	Text  *string `json:"text"`
}

// EncodeTexts writes s in the text format (see the package comment),
// gzip-compressed. Texts must be valid UTF-8 of at most MaxLineBytes/2
// bytes (JSON escaping may double them).
func EncodeTexts(w io.Writer, s *Texts) error {
	labelled := len(s.ClassNames) > 0
	switch {
	case len(s.ClassNames) > MaxClasses:
		return fmt.Errorf("encode texts: %d class names exceed %d", len(s.ClassNames), MaxClasses)
	case labelled && len(s.Labels) != len(s.Texts):
		return fmt.Errorf("encode texts: %d labels for %d texts", len(s.Labels), len(s.Texts))
	case !labelled && len(s.Labels) > 0:
		return fmt.Errorf("encode texts: %d labels but no class names", len(s.Labels))
	case len(s.Texts) > MaxItems:
		return fmt.Errorf("encode texts: %d texts exceed %d", len(s.Texts), MaxItems)
	}
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(textsHeader{Format: TextsFormat, ClassNames: s.ClassNames}); err != nil {
		return fmt.Errorf("encode texts: %w", err)
	}
	for i, t := range s.Texts {
		rec := textRecord{Text: t}
		if labelled {
			if l := s.Labels[i]; l < 0 || l >= len(s.ClassNames) {
				return fmt.Errorf("encode texts: text %d has label %d outside [0, %d)", i, l, len(s.ClassNames))
			}
			rec.Label = &s.Labels[i]
		}
		if !utf8.ValidString(t) {
			return fmt.Errorf("encode texts: text %d is not valid UTF-8", i)
		}
		if len(t) > MaxLineBytes/2 {
			return fmt.Errorf("encode texts: text %d is too long (%d bytes)", i, len(t))
		}
		if err := enc.Encode(rec); err != nil {
			return fmt.Errorf("encode texts: text %d: %w", i, err)
		}
		if raw.Len() > MaxTextBytes {
			return fmt.Errorf("encode texts: %w (%d bytes)", ErrTooLarge, MaxTextBytes)
		}
	}
	if err := writeGzip(w, raw.Bytes()); err != nil {
		return fmt.Errorf("encode texts: %w", err)
	}
	return nil
}

// DecodeTexts reads the text format, gzip-compressed or not.
func DecodeTexts(r io.Reader) (*Texts, error) {
	rd, closeFn, err := decompress(r, MaxTextBytes)
	if err != nil {
		return nil, fmt.Errorf("decode texts: %w", err)
	}
	defer closeFn()
	s, err := decodeTexts(rd)
	if err != nil {
		return nil, fmt.Errorf("decode texts: %w", err)
	}
	return s, nil
}

func decodeTexts(r io.Reader) (*Texts, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	line := 0
	next := func() ([]byte, bool) {
		for sc.Scan() {
			if sc.Err() != nil {
				// The reader failed: this is a partial last line.
				return nil, false
			}
			line++
			b := bytes.TrimSpace(sc.Bytes())
			if line == 1 {
				b = bytes.TrimPrefix(b, []byte(utf8BOM))
			}
			if len(b) > 0 {
				return b, true
			}
		}
		return nil, false
	}
	b, ok := next()
	if !ok {
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("header: %w", scanErr(err))
		}
		return nil, errors.New("missing header line")
	}
	var hdr textsHeader
	if err := strictjson.Unmarshal(b, &hdr); err != nil {
		var rec textLine
		if strictjson.Unmarshal(b, &rec) == nil && rec.Text != nil {
			return nil, fmt.Errorf("header (line %d): the first line is a text, not the header: %s", line, headerHint)
		}
		return nil, fmt.Errorf("header (line %d): %w; %s", line, err, headerHint)
	}
	if hdr.Format != TextsFormat {
		return nil, fmt.Errorf("header (line %d): format %q, want %q; %s", line, hdr.Format, TextsFormat, headerHint)
	}
	if len(hdr.ClassNames) > MaxClasses {
		return nil, fmt.Errorf("header (line %d): %d class names exceed %d", line, len(hdr.ClassNames), MaxClasses)
	}
	labelled := len(hdr.ClassNames) > 0
	s := &Texts{Texts: []string{}}
	if labelled {
		s.ClassNames, s.Labels = hdr.ClassNames, []int{}
	}
	for {
		b, ok := next()
		if !ok {
			break
		}
		if len(s.Texts) == MaxItems {
			return nil, fmt.Errorf("line %d: more than %d texts", line, MaxItems)
		}
		var rec textLine
		if err := strictjson.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if rec.Text == nil {
			return nil, fmt.Errorf("line %d: no \"text\"", line)
		}
		switch {
		case labelled && rec.Label == nil:
			return nil, fmt.Errorf("line %d: no \"label\" although the header has class_names", line)
		case !labelled && rec.Label != nil:
			return nil, fmt.Errorf("line %d: a \"label\" but the header has no class_names", line)
		case labelled && (*rec.Label < 0 || *rec.Label >= len(hdr.ClassNames)):
			return nil, fmt.Errorf("line %d: label %d outside [0, %d)", line, *rec.Label, len(hdr.ClassNames))
		}
		s.Texts = append(s.Texts, *rec.Text)
		if labelled {
			s.Labels = append(s.Labels, *rec.Label)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, scanErr(err))
	}
	return s, nil
}

// scanErr explains a line that is too long.
func scanErr(err error) error {
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("longer than %d bytes: %w", MaxLineBytes, err)
	}
	return err
}

// isTexts reports whether a decompressed stream starting with b looks like
// the text format: a JSON object, after optional white space and BOM.
func isTexts(b []byte) bool {
	b = bytes.TrimLeft(bytes.TrimPrefix(b, []byte(utf8BOM)), " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}
