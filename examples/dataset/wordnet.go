package dataset

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// WordNetDir is where the Debian package wordnet-base installs the WordNet
// 3.0 database (the WordNet 3.0 licence: use, copy, modify and distribute
// with its notice kept).
const WordNetDir = "/usr/share/wordnet"

// NounSupersenses are WordNet's noun lexicographer files in the order of
// their numbers 3–28 (lexnames(5WN)): the coarse semantic class of each
// noun synset, its "supersense".
var NounSupersenses = []string{"noun.Tops", "noun.act", "noun.animal", "noun.artifact", "noun.attribute", "noun.body",
	"noun.cognition", "noun.communication", "noun.event", "noun.feeling", "noun.food",
	"noun.group", "noun.location", "noun.motive", "noun.object", "noun.person",
	"noun.phenomenon", "noun.plant", "noun.possession", "noun.process", "noun.quantity",
	"noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time"}

// firstNounLexFile is the lexicographer file number of NounSupersenses[0].
const firstNounLexFile = 3

// NounSynset is one noun synset of WordNet's data.noun.
type NounSynset struct {
	// Offset is the synset's byte offset in data.noun, its identifier.
	Offset int
	// Supersense is its lexicographer file, e.g. "noun.animal".
	Supersense string
	// Words are its synonyms, underscores turned into spaces.
	Words []string
	// Gloss is its definition and example sentences.
	Gloss string
}

// Text is the synset as a dictionary line: its first three words, a
// colon, and its gloss ("dog, domestic dog, Canis familiaris: a member of
// the genus Canis ...").
func (s NounSynset) Text() string {
	return strings.Join(s.Words[:min(len(s.Words), 3)], ", ") + ": " + s.Gloss
}

// wordNetMaxLine bounds a line of data.noun (WordNet 3.0's longest is
// under 16 kB).
const wordNetMaxLine = 1 << 20

// LoadWordNetNouns reads every synset of dir/data.noun (a WordNet 3.0
// database: WordNetDir), in file order. Licence lines (starting with two
// spaces) are skipped; a synset line is "offset lex_filenum n w_cnt word
// lex_id ... | gloss" with w_cnt in hexadecimal. A line that does not parse
// is an error naming it.
func LoadWordNetNouns(dir string) ([]NounSynset, error) {
	path := filepath.Join(dir, "data.noun")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("wordnet: %w (install the Debian package wordnet-base)", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), wordNetMaxLine)
	var out []NounSynset
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "  ") || line == "" {
			continue
		}
		s, err := parseNounSynset(line)
		if err != nil {
			return nil, fmt.Errorf("wordnet: %s line %d: %w", path, n, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("wordnet: %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("wordnet: %s: no synsets", path)
	}
	return out, nil
}

func parseNounSynset(line string) (NounSynset, error) {
	var s NounSynset
	head, gloss, ok := strings.Cut(line, " | ")
	if !ok {
		return s, fmt.Errorf("no gloss")
	}
	f := strings.Fields(head)
	if len(f) < 6 || f[2] != "n" {
		return s, fmt.Errorf("not a noun synset: %q", head[:min(len(head), 40)])
	}
	var err error
	if s.Offset, err = strconv.Atoi(f[0]); err != nil {
		return s, fmt.Errorf("offset %q", f[0])
	}
	lex, err := strconv.Atoi(f[1])
	if i := lex - firstNounLexFile; err != nil || i < 0 || i >= len(NounSupersenses) {
		return s, fmt.Errorf("lexicographer file %q is not a noun's", f[1])
	} else {
		s.Supersense = NounSupersenses[i]
	}
	w, err := strconv.ParseUint(f[3], 16, 8)
	if err != nil || w == 0 || len(f) < 4+2*int(w) {
		return s, fmt.Errorf("word count %q", f[3])
	}
	for i := range int(w) {
		word := f[4+2*i]
		if k := strings.IndexByte(word, '('); k > 0 { // adjective markers such as "(a)"
			word = word[:k]
		}
		s.Words = append(s.Words, strings.ReplaceAll(word, "_", " "))
	}
	s.Gloss = strings.TrimSpace(gloss)
	return s, nil
}

// NounTextSet returns the synsets as a labelled text set: each synset's
// Text, labelled by its supersense, ClassNames NounSupersenses.
func NounTextSet(syns []NounSynset) *TextSet {
	out := &TextSet{ClassNames: slices.Clone(NounSupersenses)}
	for _, s := range syns {
		out.Texts = append(out.Texts, s.Text())
		out.Labels = append(out.Labels, slices.Index(NounSupersenses, s.Supersense))
	}
	return out
}

// WordNetSubset returns the bundled WordNet subset: 300 noun synsets of
// each of ten supersenses (WordNetSubsetClasses) as NounSynset.Text,
// ClassNames NounSupersenses. Each call decodes a fresh copy.
func WordNetSubset() (*TextSet, error) {
	s, err := DecodeTexts(bytes.NewReader(wordNetSubset))
	if err != nil {
		return nil, fmt.Errorf("bundled WordNet subset: %w", err)
	}
	return s, nil
}

// WordNetSubsetClasses are the supersenses of the bundled WordNet subset.
var WordNetSubsetClasses = []string{"noun.artifact", "noun.person", "noun.plant", "noun.animal", "noun.location",
	"noun.substance", "noun.food", "noun.body", "noun.object", "noun.quantity"}

// NounSubset draws up to perClass synsets of each of classes from all (a
// NounTextSet) and returns them shuffled, ClassNames kept; it is
// deterministic for a seed.
func NounSubset(all *TextSet, classes []string, perClass int, seed uint64) (*TextSet, error) {
	rng := NewRand(seed)
	groups, err := ByClass(all.Labels, Indices(len(all.Labels)), len(all.ClassNames))
	if err != nil {
		return nil, fmt.Errorf("wordnet subset: %w", err)
	}
	var idx []int
	for _, c := range classes {
		k := slices.Index(all.ClassNames, c)
		if k < 0 {
			return nil, fmt.Errorf("wordnet subset: no class %q", c)
		}
		g := Shuffled(groups[k], rng)
		idx = append(idx, g[:min(perClass, len(g))]...)
	}
	out, err := all.Subset(Shuffled(idx, rng))
	if err != nil {
		return nil, fmt.Errorf("wordnet subset: %w", err)
	}
	return out, nil
}

// Supersenses keeps the texts of all (a NounTextSet or WordNetSubset) whose
// supersense is one of classes and relabels them by their index in
// classes; ClassNames are the classes without their "noun." prefix. A
// class that is not a supersense of all, or one given twice, is an error.
func Supersenses(all *TextSet, classes []string) (*TextSet, error) {
	id := map[int]int{}
	out := &TextSet{ClassNames: make([]string, len(classes))}
	for i, c := range classes {
		k := slices.Index(all.ClassNames, c)
		if k < 0 {
			return nil, fmt.Errorf("wordnet: class %q is not a noun supersense (%s)", c, strings.Join(all.ClassNames, ", "))
		}
		if _, dup := id[k]; dup {
			return nil, fmt.Errorf("wordnet: class %q given twice", c)
		}
		id[k] = i
		out.ClassNames[i] = strings.TrimPrefix(c, "noun.")
	}
	for i, t := range all.Texts {
		if c, ok := id[all.Labels[i]]; ok {
			out.Texts, out.Labels = append(out.Texts, t), append(out.Labels, c)
		}
	}
	return out, nil
}
