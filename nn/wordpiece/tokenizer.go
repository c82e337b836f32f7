package wordpiece

import "unicode/utf8"

// MaxInputCharsPerWord is the longest word (in characters) that WordPiece
// splits; longer words become [UNK], as in BERT. It is also the most a
// tokenizer.json's max_input_chars_per_word may raise it to (a larger value
// is clamped to it; Hugging Face's default is 100 too), so that a word
// costs at most MaxInputCharsPerWord vocabulary lookups per character.
const MaxInputCharsPerWord = 100

// Tokenizer turns text into BERT word pieces and model inputs. It is safe for
// concurrent use.
type Tokenizer struct {
	vocab     *Vocab
	lowerCase bool
	maxChars  int // longest word split; longer ones are unknown
	// onLookup, if set (by tests), is called on every vocabulary lookup.
	onLookup func()
}

// Encoding is the model input for one text (or text pair): token ids,
// attention mask (1 for real tokens, 0 for padding) and token type ids (0
// for the first segment, 1 for the second), all of the same length.
type Encoding struct {
	IDs, AttentionMask, TypeIDs []int
}

// NewTokenizer returns a tokenizer over v; lowerCase selects the uncased
// behaviour (lower-casing and accent stripping) of uncased BERT models.
func NewTokenizer(v *Vocab, lowerCase bool) *Tokenizer {
	return &Tokenizer{vocab: v, lowerCase: lowerCase, maxChars: MaxInputCharsPerWord}
}

// Vocab returns the tokenizer's vocabulary.
func (t *Tokenizer) Vocab() *Vocab { return t.vocab }

// LowerCase reports whether the tokenizer lower-cases and strips accents
// (uncased models).
func (t *Tokenizer) LowerCase() bool { return t.lowerCase }

// Tokenize splits text into word pieces: BasicTokenize, then greedy
// longest-match-first WordPiece on every word, continuation pieces carrying
// the "##" prefix (the vocabulary's ContinuationPrefix). A word longer than
// MaxInputCharsPerWord characters (or a tokenizer.json's smaller
// max_input_chars_per_word), or one that cannot be covered by vocabulary
// pieces, becomes a single [UNK] (the vocabulary's unknown token).
//
// Cost: linear in the text. The longest match at a position is sought
// among pieces no longer than the vocabulary's longest token (nor than the
// word), so a word costs at most min(longest token, MaxInputCharsPerWord)
// vocabulary lookups per character, and a longer word costs none
// (TestTokenizeLinear).
func (t *Tokenizer) Tokenize(text string) []string {
	var out []string
	for _, w := range BasicTokenize(text, t.lowerCase) {
		out = t.appendWordPieces(out, w)
	}
	return out
}

// appendWordPieces appends the word pieces of one word.
func (t *Tokenizer) appendWordPieces(out []string, word string) []string {
	if utf8.RuneCountInString(word) > t.maxChars {
		return append(out, t.vocab.tokens[t.vocab.unk])
	}
	n := len(out)
	for start := 0; start < len(word); {
		// Continuation pieces are looked up without their "##" prefix, so
		// no string is built per candidate.
		m, longest := t.vocab.ids, t.vocab.longest
		if start > 0 {
			m, longest = t.vocab.cont, t.vocab.longestCont
		}
		// The first candidate is the longest piece any token could match.
		end := start
		for range longest {
			if end == len(word) {
				break
			}
			_, size := utf8.DecodeRuneInString(word[end:])
			end += size
		}
		found := -1
		for end > start {
			if t.onLookup != nil {
				t.onLookup()
			}
			if id, ok := m[word[start:end]]; ok {
				found = id
				break
			}
			// Step back one whole character.
			_, size := utf8.DecodeLastRuneInString(word[start:end])
			end -= size
		}
		if found < 0 {
			return append(out[:n], t.vocab.tokens[t.vocab.unk])
		}
		out = append(out, t.vocab.tokens[found])
		start = end
	}
	return out
}

// IDs maps tokens to ids, unknown tokens to [UNK].
func (t *Tokenizer) IDs(tokens []string) []int {
	ids := make([]int, len(tokens))
	for i, tok := range tokens {
		id, ok := t.vocab.ids[tok]
		if !ok {
			id = t.vocab.unk
		}
		ids[i] = id
	}
	return ids
}

// Encode tokenizes text and frames it as [CLS] tokens [SEP]. With maxLen > 0
// the result has exactly maxLen positions: tokens are truncated so that
// [CLS] and [SEP] fit (for maxLen < 2 the framing itself is cut), and the
// rest is padded with [PAD] and attention mask 0. With maxLen <= 0 nothing
// is truncated or padded. Token type ids are all 0.
func (t *Tokenizer) Encode(text string, maxLen int) Encoding {
	ids := t.IDs(t.Tokenize(text))
	if maxLen > 0 && len(ids) > maxLen-2 {
		ids = ids[:max(maxLen-2, 0)]
	}
	seq := make([]int, 0, len(ids)+2)
	seq = append(seq, t.vocab.cls)
	seq = append(seq, ids...)
	seq = append(seq, t.vocab.sep)
	return t.frame(seq, nil, maxLen)
}

// EncodePair frames a sentence pair as [CLS] a [SEP] b [SEP] with token type
// ids 0 for "[CLS] a [SEP]" and 1 for "b [SEP]". With maxLen > 0 the pair is
// truncated longest-first (one token at a time from the longer segment, as
// BERT does) to fit maxLen-3 tokens and then padded to maxLen; for maxLen < 3
// the framing itself is cut.
func (t *Tokenizer) EncodePair(a, b string, maxLen int) Encoding {
	ia, ib := t.IDs(t.Tokenize(a)), t.IDs(t.Tokenize(b))
	if maxLen > 0 {
		budget := max(maxLen-3, 0)
		for len(ia)+len(ib) > budget {
			if len(ia) > len(ib) {
				ia = ia[:len(ia)-1]
			} else {
				ib = ib[:len(ib)-1]
			}
		}
	}
	first := make([]int, 0, len(ia)+2)
	first = append(first, t.vocab.cls)
	first = append(first, ia...)
	first = append(first, t.vocab.sep)
	second := append(append(make([]int, 0, len(ib)+1), ib...), t.vocab.sep)
	return t.frame(first, second, maxLen)
}

// frame concatenates the segments, sets type ids, then cuts or pads to
// maxLen (when positive).
func (t *Tokenizer) frame(first, second []int, maxLen int) Encoding {
	n := len(first) + len(second)
	size := n
	if maxLen > 0 {
		size = maxLen
	}
	e := Encoding{IDs: make([]int, size), AttentionMask: make([]int, size), TypeIDs: make([]int, size)}
	for i := range size {
		switch {
		case i < len(first):
			e.IDs[i], e.AttentionMask[i] = first[i], 1
		case i < n:
			e.IDs[i], e.AttentionMask[i], e.TypeIDs[i] = second[i-len(first)], 1, 1
		default:
			e.IDs[i] = t.vocab.pad
		}
	}
	return e
}
