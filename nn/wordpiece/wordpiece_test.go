package wordpiece

import (
	"bytes"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// bertTestVocab is the vocabulary of BERT's tokenization_test.py
// (test_full_tokenizer), with [PAD] appended so it can frame inputs.
var bertTestVocab = []string{"[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un", "runn", "##ing", ",", "[PAD]"}

func mustVocab(t testing.TB, tokens []string) *Vocab {
	t.Helper()
	v, err := NewVocab(tokens)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestFullTokenizer(t *testing.T) {
	// BERT's test_full_tokenizer, through a vocab.txt file.
	path := filepath.Join(t.TempDir(), "vocab.txt")
	if err := mustVocab(t, bertTestVocab).SaveVocab(path); err != nil {
		t.Fatal(err)
	}
	v, err := LoadVocab(path)
	if err != nil {
		t.Fatal(err)
	}
	tok := NewTokenizer(v, true)
	got := tok.Tokenize("UNwant\u00E9d,running")
	want := []string{"un", "##want", "##ed", ",", "runn", "##ing"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Tokenize = %q, want %q", got, want)
	}
	if ids := tok.IDs(got); !reflect.DeepEqual(ids, []int{7, 4, 5, 10, 8, 9}) {
		t.Errorf("IDs = %v", ids)
	}
}

func TestWordPiece(t *testing.T) {
	v := mustVocab(t, append([]string{"[PAD]", "aff", "##aff", "##able", "##a"}, bertTestVocab[:10]...))
	tok := NewTokenizer(v, true)
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"unwanted running", []string{"un", "##want", "##ed", "runn", "##ing"}},
		{"unwantedX running", []string{"[UNK]", "runn", "##ing"}}, // X is lower-cased to x: no piece
		{"unaffable", []string{"un", "##aff", "##able"}},
		{"wanta", []string{"want", "##a"}},
		{strings.Repeat("a", 101), []string{"[UNK]"}},
		{"un" + strings.Repeat("##", 0) + strings.Repeat("able", 24) + "ed", []string{"un", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##able", "##ed"}},
	}
	for _, tc := range tests {
		if got := tok.Tokenize(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Tokenize(%.30q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestBasicTokenize(t *testing.T) {
	tests := []struct {
		in    string
		lower bool
		want  []string
	}{
		{" \tHeLLo!how  \n Are yoU?  ", true, []string{"hello", "!", "how", "are", "you", "?"}},
		{"H\u00E9llo", true, []string{"hello"}},
		{" \tHeLLo!how  \n Are yoU?  ", false, []string{"HeLLo", "!", "how", "Are", "yoU", "?"}},
		{"H\u00E9llo", false, []string{"H\u00E9llo"}},
		{" \tHäLLo!how  \n Are yoU?  ", true, []string{"hallo", "!", "how", "are", "you", "?"}},
		{"ah\u535A\u63A8zz", true, []string{"ah", "\u535A", "\u63A8", "zz"}},
		{"a\u0000b\ufffdc\u0005d", true, []string{"abcd"}}, // cleaned characters
		{"x\u00A0y\u3000z", true, []string{"x", "y", "z"}}, // Unicode spaces
		{"don't-stop$now`.", true, []string{"don", "'", "t", "-", "stop", "$", "now", "`", "."}},
		{"«quoted»¿what¡", true, []string{"«", "quoted", "»", "¿", "what", "¡"}},     // Unicode P*
		{"1+1=2 ^_^ ~", true, []string{"1", "+", "1", "=", "2", "^", "_", "^", "~"}}, // ASCII symbols count as punctuation
		{"€5 ©", true, []string{"€5", "©"}},                                          // non-ASCII symbols (Sc, So) do not
		{"Žemal ÅNGSTRÖM ǅ", true, []string{"zemal", "angstrom", "ǆ"}},
		{"", true, nil},
		{"\xff\xfe", true, nil},
	}
	for _, tc := range tests {
		if got := BasicTokenize(tc.in, tc.lower); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("BasicTokenize(%q, %v) = %q, want %q", tc.in, tc.lower, got, tc.want)
		}
	}
}

func TestCharClasses(t *testing.T) {
	for _, c := range []struct {
		r                    rune
		space, control, punc bool
	}{
		{' ', true, false, false}, {'\t', true, false, false}, {'\r', true, false, false},
		{'\n', true, false, false}, {'\u00A0', true, false, false},
		{'A', false, false, false}, {'-', false, false, true},
		{'\u0005', false, true, false}, {'\U0001F4A9', false, false, false},
		{'$', false, false, true}, {'`', false, false, true}, {'.', false, false, true},
		{'\u200B', false, true, false},     // Cf
		{'\U000E0000', false, true, false}, // unassigned (Cn)
	} {
		if isWhitespace(c.r) != c.space || isControl(c.r) != c.control || isPunct(c.r) != c.punc {
			t.Errorf("%U: whitespace %v control %v punct %v, want %v %v %v", c.r,
				isWhitespace(c.r), isControl(c.r), isPunct(c.r), c.space, c.control, c.punc)
		}
	}
}

func TestEncode(t *testing.T) {
	tok := NewTokenizer(mustVocab(t, bertTestVocab), true)
	const cls, sep, pad, unk = 1, 2, 11, 0
	tests := []struct {
		name   string
		text   string
		maxLen int
		ids    []int
		mask   []int
	}{
		{"padded", "unwanted", 8, []int{cls, 7, 4, 5, sep, pad, pad, pad}, []int{1, 1, 1, 1, 1, 0, 0, 0}},
		{"exact", "unwanted", 5, []int{cls, 7, 4, 5, sep}, []int{1, 1, 1, 1, 1}},
		{"truncated", "unwanted, running", 5, []int{cls, 7, 4, 5, sep}, []int{1, 1, 1, 1, 1}},
		{"unknown", "xyz want", 6, []int{cls, unk, 3, sep, pad, pad}, []int{1, 1, 1, 1, 0, 0}},
		{"no limit", "want,", 0, []int{cls, 3, 10, sep}, []int{1, 1, 1, 1}},
		{"empty", "", 3, []int{cls, sep, pad}, []int{1, 1, 0}},
		{"tiny", "want", 1, []int{cls}, []int{1}},
	}
	for _, tc := range tests {
		e := tok.Encode(tc.text, tc.maxLen)
		if !reflect.DeepEqual(e.IDs, tc.ids) || !reflect.DeepEqual(e.AttentionMask, tc.mask) || !reflect.DeepEqual(e.TypeIDs, make([]int, len(tc.ids))) {
			t.Errorf("%s: Encode = %+v, want ids %v mask %v", tc.name, e, tc.ids, tc.mask)
		}
	}
}

func TestEncodePair(t *testing.T) {
	tok := NewTokenizer(mustVocab(t, bertTestVocab), true)
	const cls, sep, pad = 1, 2, 11
	tests := []struct {
		name          string
		a, b          string
		maxLen        int
		ids, mask, tt []int
	}{
		{"padded", "want", "running", 9,
			[]int{cls, 3, sep, 8, 9, sep, pad, pad, pad}, []int{1, 1, 1, 1, 1, 1, 0, 0, 0}, []int{0, 0, 0, 1, 1, 1, 0, 0, 0}},
		{"longest first", "unwanted", "want", 7, // a has 3 tokens, b 1: budget 4 keeps them all
			[]int{cls, 7, 4, 5, sep, 3, sep}, []int{1, 1, 1, 1, 1, 1, 1}, []int{0, 0, 0, 0, 0, 1, 1}},
		{"truncate longer", "unwanted", "want", 6, // budget 3: a loses one token
			[]int{cls, 7, 4, sep, 3, sep}, []int{1, 1, 1, 1, 1, 1}, []int{0, 0, 0, 0, 1, 1}},
		{"truncate both", "unwanted", "running", 5, // a 3, b 2 -> 1, 1
			[]int{cls, 7, sep, 8, sep}, []int{1, 1, 1, 1, 1}, []int{0, 0, 0, 1, 1}},
	}
	for _, tc := range tests {
		e := tok.EncodePair(tc.a, tc.b, tc.maxLen)
		if !reflect.DeepEqual(e.IDs, tc.ids) || !reflect.DeepEqual(e.AttentionMask, tc.mask) || !reflect.DeepEqual(e.TypeIDs, tc.tt) {
			t.Errorf("%s: EncodePair = %+v\nwant ids %v mask %v types %v", tc.name, e, tc.ids, tc.mask, tc.tt)
		}
	}
}

func TestVocabErrors(t *testing.T) {
	tests := []struct {
		name   string
		tokens []string
		want   string
	}{
		{"duplicate", []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "a"}, `token "a" at ids 4 and 5`},
		{"empty token", []string{"[PAD]", "", "[UNK]", "[CLS]", "[SEP]"}, "token 1 is empty"},
		{"missing special", []string{"[PAD]", "[UNK]", "[CLS]"}, "[SEP] missing"},
	}
	for _, tc := range tests {
		if _, err := NewVocab(tc.tokens); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := ReadVocab(strings.NewReader("")); err == nil {
		t.Error("read an empty vocabulary")
	}
	if _, err := ReadVocab(strings.NewReader(strings.Repeat("x", maxVocabTokenBytes+1))); err == nil {
		t.Error("read an over-long line")
	}
	if _, err := LoadVocab(filepath.Join(t.TempDir(), "missing.txt")); err == nil {
		t.Error("loaded a missing file")
	}
	v, err := ReadVocab(strings.NewReader("[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nhello\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := v.ID("hello"); !ok || id != 5 || v.MaskID() != 4 || v.PadID() != 0 || v.UnkID() != 1 || v.ClsID() != 2 || v.SepID() != 3 || v.Size() != 6 {
		t.Errorf("CRLF vocab parsed wrong: %v", v.Tokens())
	}
	if tok, ok := v.Token(5); !ok || tok != "hello" {
		t.Errorf("Token(5) = %q", tok)
	}
	if _, ok := v.Token(6); ok {
		t.Error("Token(6) found")
	}
	if noMask := mustVocab(t, bertTestVocab); noMask.MaskID() != -1 {
		t.Error("MaskID of a vocabulary without [MASK]")
	}
	var buf bytes.Buffer
	if _, err := v.WriteTo(&buf); err != nil || buf.String() != "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n" {
		t.Errorf("WriteTo = %q, %v", buf.String(), err)
	}
}

func FuzzEncode(f *testing.F) {
	v, err := NewVocab(append([]string{"[MASK]", "##a", "a", "é", "漢", "!"}, bertTestVocab...))
	if err != nil {
		f.Fatal(err)
	}
	f.Add("UNwant\u00E9d,running", 16, true)
	f.Add("ah\u535A\u63A8zz \x00\xff", 3, false)
	f.Add(strings.Repeat("a", 200), 0, true)
	f.Add(strings.Repeat("a", 100)+" "+strings.Repeat("aé漢", 33)+"a!", 0, true)
	f.Fuzz(func(t *testing.T, text string, maxLen int, lower bool) {
		maxLen %= 512
		tok := NewTokenizer(v, lower)
		for _, p := range tok.Tokenize(text) {
			if _, ok := v.ID(p); !ok {
				t.Fatalf("token %q not in vocabulary", p)
			}
		}
		// The longest match bounded by the longest token is BERT's.
		for _, w := range BasicTokenize(text, lower) {
			if got, want := tok.appendWordPieces(nil, w), naivePieces(v, tok.maxChars, w); !slices.Equal(got, want) {
				t.Fatalf("word %q: pieces %q, BERT's %q", w, got, want)
			}
		}
		for _, e := range []Encoding{tok.Encode(text, maxLen), tok.EncodePair(text, text+" x", maxLen)} {
			if len(e.AttentionMask) != len(e.IDs) || len(e.TypeIDs) != len(e.IDs) {
				t.Fatalf("lengths %d %d %d", len(e.IDs), len(e.AttentionMask), len(e.TypeIDs))
			}
			if maxLen > 0 && len(e.IDs) != maxLen {
				t.Fatalf("%d ids, want %d", len(e.IDs), maxLen)
			}
			if e.IDs[0] != v.ClsID() {
				t.Fatalf("first id %d is not [CLS]", e.IDs[0])
			}
			padding := false
			for i, id := range e.IDs {
				if id < 0 || id >= v.Size() {
					t.Fatalf("id %d out of range", id)
				}
				if e.AttentionMask[i] == 0 {
					padding = true
					if id != v.PadID() || e.TypeIDs[i] != 0 {
						t.Fatalf("padding position %d holds id %d type %d", i, id, e.TypeIDs[i])
					}
				} else if padding {
					t.Fatalf("real token after padding at %d", i)
				}
			}
		}
	})
}
