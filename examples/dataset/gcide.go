package dataset

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"unicode"
)

// GCIDEPath is where the Debian package dict-gcide installs the GNU
// Collaborative International Dictionary of English (GPL-2+), in dictd's
// dictzip format (gzip with random-access chunks: any gzip reader reads it).
const GCIDEPath = "/usr/share/dictd/gcide.dict.dz"

// gcideMaxBytes bounds the uncompressed dictionary (dict-gcide 0.48.5 holds
// 40 MB).
const gcideMaxBytes = 256 << 20

var (
	// gcidePron is a headword's pronunciation, `\Ab*do"men\`.
	gcidePron = regexp.MustCompile(`\\[^\\\n]*\\`)
	// gcideSource is a source tag on a line of its own: "[1913 Webster]",
	// "[PJC]", "[WordNet 1.5 +PJC]".
	gcideSource = regexp.MustCompile(`^\[[^\]]*\]$`)
	// gcideChar is a character code, "[=e]", "[a^]", "[\'e]": its letter
	// is kept.
	gcideChar = regexp.MustCompile(`\[[^\]\s]{1,3}\]`)
)

// gcideLetters keeps the letters of a character code.
func gcideLetters(code string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) {
			return r
		}
		return -1
	}, code)
}

// LoadGCIDE reads a dictd database of GCIDE (GCIDEPath; gzip- or
// dictzip-compressed when the name ends in .dz or .gz) and returns its
// paragraphs as plain English text, in file order: the header entries
// (00-database-*) are dropped, each paragraph's lines are joined by
// spaces, and dictd's markup is removed (pronunciations between
// backslashes, braces around cross-references, source tags such as
// "[1913 Webster]" on a line of their own). Entries taken from WordNet
// (a source tag naming it) are left out: WordNet is a labelled data set of
// its own (LoadWordNetNouns), not to be seen in pretraining. It refuses a
// file that inflates beyond 256 MiB.
func LoadGCIDE(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gcide: %w (install the Debian package dict-gcide)", err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".dz") || strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("gcide: %s: %w", path, err)
		}
		defer z.Close()
		r = z
	}
	paras, err := readGCIDE(io.LimitReader(r, gcideMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("gcide: %s: %w", path, err)
	}
	return paras, nil
}

// readGCIDE splits a dictd text into cleaned paragraphs (see LoadGCIDE).
// An entry starts at a line that is not indented (its headword); an entry
// any of whose source tags names WordNet ("[WordNet 1.5]") is left out
// whole.
func readGCIDE(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out, entry []string
	var para []string
	wordNet := false
	total := 0
	endPara := func() {
		if p := strings.Join(strings.Fields(strings.Join(para, " ")), " "); p != "" {
			entry = append(entry, p)
		}
		para = para[:0]
	}
	endEntry := func() {
		endPara()
		if !wordNet && len(entry) > 0 && !strings.HasPrefix(entry[0], "00-database-") && !strings.HasPrefix(entry[0], "00database") {
			out = append(out, entry...)
		}
		entry, wordNet = entry[:0], false
	}
	for sc.Scan() {
		line := sc.Text()
		if total += len(line) + 1; total > gcideMaxBytes {
			return nil, fmt.Errorf("larger than %d bytes", gcideMaxBytes)
		}
		t := strings.TrimSpace(line)
		switch {
		case t == "":
			endPara()
			continue
		case line[0] != ' ' && line[0] != '\t':
			endEntry()
		}
		wordNet = wordNet || strings.Contains(t, "[WordNet")
		if gcideSource.MatchString(t) {
			continue
		}
		t = gcidePron.ReplaceAllString(t, "")
		t = gcideChar.ReplaceAllStringFunc(t, gcideLetters)
		t = strings.NewReplacer("{", "", "}", "").Replace(t)
		para = append(para, t)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	endEntry()
	return out, nil
}
