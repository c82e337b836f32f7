// Package wordpiece implements BERT's WordPiece tokenizer: the BasicTokenizer
// pre-tokenization of Google's BERT (text cleaning, optional lower-casing
// with accent stripping, spacing of CJK characters, punctuation and
// whitespace splitting), greedy longest-match-first WordPiece with "##"
// continuations, and the [CLS]/[SEP]/[PAD] framing with attention mask and
// token type ids that BERT-style models take. Vocabularies are read from a
// Hugging Face vocab.txt (LoadVocab) or a whole tokenizer from its
// tokenizer.json (LoadTokenizerJSON), or built from a corpus with
// BuildVocab.
package wordpiece

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// Special tokens.
const (
	PadToken  = "[PAD]"
	UnkToken  = "[UNK]"
	ClsToken  = "[CLS]"
	SepToken  = "[SEP]"
	MaskToken = "[MASK]"
)

// ContinuationPrefix marks a word piece that continues a word.
const ContinuationPrefix = "##"

// maxVocabTokenBytes bounds one vocabulary line.
const maxVocabTokenBytes = 1 << 16

// Vocab maps tokens to ids (the line numbers of vocab.txt) and back.
type Vocab struct {
	tokens                   []string
	ids                      map[string]int
	cont                     map[string]int // continuation tokens ("##x") keyed by x
	longest, longestCont     int            // the most characters of a key of ids, of cont
	prefix                   string         // the continuation prefix
	pad, unk, cls, sep, mask int
}

// VocabOptions are the WordPiece model settings a Hugging Face
// tokenizer.json may change; the zero value is BERT's.
type VocabOptions struct {
	// ContinuationPrefix marks continuation pieces ("" means "##").
	ContinuationPrefix string
	// UnkToken is the unknown token ("" means "[UNK]").
	UnkToken string
}

// NewVocab builds a vocabulary in which tokens[i] has id i. Tokens must be
// non-empty and distinct, and [PAD], [UNK], [CLS] and [SEP] must be present
// ([MASK] is optional).
func NewVocab(tokens []string) (*Vocab, error) { return NewVocabWith(tokens, VocabOptions{}) }

// NewVocabWith is NewVocab with the continuation prefix and the unknown
// token of opt.
func NewVocabWith(tokens []string, opt VocabOptions) (*Vocab, error) {
	prefix, unk := opt.ContinuationPrefix, opt.UnkToken
	if prefix == "" {
		prefix = ContinuationPrefix
	}
	if unk == "" {
		unk = UnkToken
	}
	v := &Vocab{tokens: append([]string(nil), tokens...), ids: make(map[string]int, len(tokens)), cont: map[string]int{}, prefix: prefix}
	for i, t := range tokens {
		if t == "" {
			return nil, fmt.Errorf("vocab: token %d is empty", i)
		}
		if j, dup := v.ids[t]; dup {
			return nil, fmt.Errorf("vocab: token %q at ids %d and %d", t, j, i)
		}
		v.ids[t] = i
		v.longest = max(v.longest, utf8.RuneCountInString(t))
		if rest, ok := strings.CutPrefix(t, prefix); ok && rest != "" {
			v.cont[rest] = i
			v.longestCont = max(v.longestCont, utf8.RuneCountInString(rest))
		}
	}
	for _, s := range []struct {
		tok string
		id  *int
	}{{PadToken, &v.pad}, {unk, &v.unk}, {ClsToken, &v.cls}, {SepToken, &v.sep}} {
		id, ok := v.ids[s.tok]
		if !ok {
			return nil, fmt.Errorf("vocab: special token %s missing", s.tok)
		}
		*s.id = id
	}
	v.mask = -1
	if id, ok := v.ids[MaskToken]; ok {
		v.mask = id
	}
	return v, nil
}

// ReadVocab reads a vocab.txt (one token per line, id = line number; a
// trailing "\r" is removed from each line) from r.
func ReadVocab(r io.Reader) (*Vocab, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxVocabTokenBytes)
	var tokens []string
	for sc.Scan() {
		tokens = append(tokens, strings.TrimSuffix(sc.Text(), "\r"))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("vocab: line %d: %w", len(tokens)+1, err)
	}
	if len(tokens) == 0 {
		return nil, errors.New("vocab: empty")
	}
	return NewVocab(tokens)
}

// LoadVocab reads the vocab.txt file at path.
func LoadVocab(path string) (*Vocab, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vocab: %w", err)
	}
	defer f.Close()
	v, err := ReadVocab(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// WriteTo writes the vocabulary in vocab.txt format, one token per line.
func (v *Vocab) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriter(w)
	var n int64
	for _, t := range v.tokens {
		k, err := bw.WriteString(t + "\n")
		n += int64(k)
		if err != nil {
			return n, fmt.Errorf("vocab: write: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("vocab: write: %w", err)
	}
	return n, nil
}

// SaveVocab writes the vocabulary to path in vocab.txt format.
func (v *Vocab) SaveVocab(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("vocab: %w", err)
	}
	if _, err := v.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("vocab: %w", err)
	}
	return nil
}

// ContinuationPrefix returns the prefix of continuation pieces ("##" for
// BERT).
func (v *Vocab) ContinuationPrefix() string { return v.prefix }

// Size returns the number of tokens.
func (v *Vocab) Size() int { return len(v.tokens) }

// ID returns the id of token.
func (v *Vocab) ID(token string) (int, bool) {
	id, ok := v.ids[token]
	return id, ok
}

// Token returns the token with the given id.
func (v *Vocab) Token(id int) (string, bool) {
	if id < 0 || id >= len(v.tokens) {
		return "", false
	}
	return v.tokens[id], true
}

// Tokens returns a copy of the tokens in id order.
func (v *Vocab) Tokens() []string { return append([]string(nil), v.tokens...) }

// PadID returns the id of [PAD].
func (v *Vocab) PadID() int { return v.pad }

// UnkID returns the id of the unknown token ([UNK]).
func (v *Vocab) UnkID() int { return v.unk }

// ClsID returns the id of [CLS].
func (v *Vocab) ClsID() int { return v.cls }

// SepID returns the id of [SEP].
func (v *Vocab) SepID() int { return v.sep }

// MaskID returns the id of [MASK], or -1 if the vocabulary has none.
func (v *Vocab) MaskID() int { return v.mask }
