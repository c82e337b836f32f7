package wordpiece

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"
)

// BuildVocab builds a lower-cased WordPiece vocabulary of at most size tokens
// from corpus, for training small models from scratch. The algorithm is the
// one Hugging Face's WordPieceTrainer uses (byte-pair-encoding merges over
// "##"-marked pieces), made fully deterministic:
//
//  1. The special tokens [PAD], [UNK], [CLS], [SEP], [MASK] get ids 0–4.
//  2. Every text is split with BasicTokenize(text, true) and word
//     frequencies are counted.
//  3. Every character seen gets a token: "c" for word-initial occurrences and
//     "##c" for the others, most frequent first (ties by token order). If
//     size cannot hold them all, the rarest are left out (they tokenize to
//     [UNK]).
//  4. Each word is a sequence of such pieces. Repeatedly, the adjacent pair
//     of pieces with the highest total frequency (ties: lexicographically
//     smallest pair) is merged into a new token — "ab" or "##ab" — added to
//     the vocabulary, until size tokens exist or no pair occurs at least
//     twice.
//
// Tokenizing with the result uses the usual greedy longest match, so whole
// frequent words become single tokens and rare words split into frequent
// pieces. BuildVocab fails if size is smaller than the 5 special tokens.
func BuildVocab(corpus []string, size int) (*Vocab, error) {
	specials := []string{PadToken, UnkToken, ClsToken, SepToken, MaskToken}
	if size < len(specials) {
		return nil, fmt.Errorf("build vocab: size %d is smaller than the %d special tokens", size, len(specials))
	}
	wordFreq := map[string]int{}
	for _, text := range corpus {
		for _, w := range BasicTokenize(text, true) {
			wordFreq[w]++
		}
	}
	uniq := make([]string, 0, len(wordFreq))
	for w := range wordFreq {
		uniq = append(uniq, w)
	}
	slices.Sort(uniq)

	// Split words into character pieces and count the pieces.
	words := make([]bwWord, len(uniq))
	charFreq := map[string]int{}
	for i, w := range uniq {
		f := wordFreq[w]
		var syms []string
		for j, r := range w {
			s := string(r)
			if j > 0 {
				s = ContinuationPrefix + s
			}
			syms = append(syms, s)
			charFreq[s] += f
		}
		words[i] = bwWord{syms: syms, freq: f}
	}
	chars := make([]string, 0, len(charFreq))
	for c := range charFreq {
		chars = append(chars, c)
	}
	slices.SortFunc(chars, func(a, b string) int {
		if charFreq[a] != charFreq[b] {
			return charFreq[b] - charFreq[a]
		}
		return strings.Compare(a, b)
	})
	tokens := append([]string(nil), specials...)
	have := map[string]bool{}
	for _, s := range specials {
		have[s] = true
	}
	for _, c := range chars {
		if len(tokens) == size {
			break
		}
		if !have[c] {
			tokens = append(tokens, c)
			have[c] = true
		}
	}

	m := newMerger(words)
	for len(tokens) < size {
		p, count, ok := m.best()
		if !ok || count < 2 {
			break
		}
		tok := p.a + strings.TrimPrefix(p.b, ContinuationPrefix)
		m.merge(p, tok)
		if !have[tok] {
			tokens = append(tokens, tok)
			have[tok] = true
		}
	}
	return NewVocab(tokens)
}

// bwWord is one distinct word being merged: its current pieces and frequency.
type bwWord struct {
	syms []string
	freq int
}

// pair is two adjacent pieces.
type pair struct{ a, b string }

// merger keeps pair frequencies, the words each pair occurs in, and a
// max-heap of (count, pair) entries that is validated lazily.
type merger struct {
	words []bwWord
	count map[pair]int
	where map[pair]map[int]bool
	h     pairHeap
}

func newMerger(words []bwWord) *merger {
	m := &merger{words: words, count: map[pair]int{}, where: map[pair]map[int]bool{}}
	for i := range words {
		m.add(i, +1)
	}
	for p, c := range m.count {
		m.h = append(m.h, pairCount{p, c})
	}
	heap.Init(&m.h)
	return m
}

// add adds (sign=+1) or removes (sign=-1) the pair counts of word i.
func (m *merger) add(i, sign int) {
	w := m.words[i]
	for j := 0; j+1 < len(w.syms); j++ {
		p := pair{w.syms[j], w.syms[j+1]}
		m.count[p] += sign * w.freq
		if sign > 0 {
			if m.where[p] == nil {
				m.where[p] = map[int]bool{}
			}
			m.where[p][i] = true
		}
	}
}

// best returns the pair with the highest count (ties: smallest pair).
func (m *merger) best() (pair, int, bool) {
	for m.h.Len() > 0 {
		top := m.h[0]
		if c := m.count[top.p]; c == top.count && c > 0 {
			return top.p, c, true
		}
		heap.Pop(&m.h) // stale entry
	}
	return pair{}, 0, false
}

// merge replaces every occurrence of p by tok and updates the counts.
func (m *merger) merge(p pair, tok string) {
	idx := make([]int, 0, len(m.where[p]))
	for i := range m.where[p] {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	touched := map[pair]bool{}
	for _, i := range idx {
		w := &m.words[i]
		for j := 0; j+1 < len(w.syms); j++ {
			touched[pair{w.syms[j], w.syms[j+1]}] = true
		}
		m.add(i, -1)
		out := w.syms[:0:0]
		for j := 0; j < len(w.syms); j++ {
			if j+1 < len(w.syms) && w.syms[j] == p.a && w.syms[j+1] == p.b {
				out = append(out, tok)
				j++
			} else {
				out = append(out, w.syms[j])
			}
		}
		w.syms = out
		m.add(i, +1)
		for j := 0; j+1 < len(w.syms); j++ {
			touched[pair{w.syms[j], w.syms[j+1]}] = true
		}
	}
	delete(m.where, p)
	for q := range touched {
		c := m.count[q]
		if c <= 0 {
			delete(m.count, q)
			delete(m.where, q)
			continue
		}
		heap.Push(&m.h, pairCount{q, c})
	}
}

// pairCount is a heap entry.
type pairCount struct {
	p     pair
	count int
}

// pairHeap orders entries by count (descending), then pair (ascending).
type pairHeap []pairCount

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(i, j int) bool {
	if h[i].count != h[j].count {
		return h[i].count > h[j].count
	}
	if h[i].p.a != h[j].p.a {
		return h[i].p.a < h[j].p.a
	}
	return h[i].p.b < h[j].p.b
}
func (h pairHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }

// Push implements heap.Interface.
func (h *pairHeap) Push(x any) { *h = append(*h, x.(pairCount)) }

// Pop implements heap.Interface.
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
