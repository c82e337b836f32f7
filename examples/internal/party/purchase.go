package party

import (
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/wordpiece"
	"github.com/selectformer/selectformer/selection/pool"
	"github.com/selectformer/selectformer/selection/purchase"
)

// BundleFormat is the format of a bundle of p's candidates: its images'
// shape, or texts.
func BundleFormat(p *pool.Pool) purchase.Format {
	if s := p.Images; s != nil {
		return purchase.Format{Kind: purchase.KindImages, Width: s.Width, Height: s.Height, Channels: s.NumChannels()}
	}
	return purchase.Format{Kind: purchase.KindTexts}
}

// ItemInput turns candidates' canonical bytes (package selection/purchase:
// the bytes mkpool writes) into the input of a checkpoint of configuration
// cfg, as the data owner's pool gives it: images of the checkpoint's size,
// or texts tokenized with tok to seq tokens. A text model without a
// tokenizer gives nil (its candidates cannot be turned into inputs).
func ItemInput(cfg model.Config, tok *wordpiece.Tokenizer) func(items [][]byte, seq int) (model.Input, error) {
	kind := pool.KindTexts
	switch {
	case cfg.Family == model.ViT:
		kind = pool.KindImages
	case tok == nil:
		return nil
	}
	return func(items [][]byte, seq int) (model.Input, error) {
		p, err := pool.FromItems(kind, cfg.ImageSize, cfg.ImageSize, items)
		if err != nil {
			return model.Input{}, err
		}
		if kind == pool.KindImages {
			seq = 0
		}
		in, err := p.Input(cfg, tok, seq)
		if err != nil {
			return model.Input{}, fmt.Errorf("the candidates as inputs: %w", err)
		}
		return in, nil
	}
}

// BuyerItemInput is the model owner's ItemInput for a target of
// configuration cfg (loaded from modelDir, "" for none): images always;
// texts with the checkpoint's tokenizer (vocabPath, or modelDir's), and
// nil, logged, where there is none: the bootstrap's openings are then
// still verified, but its texts are not compared with the tokens sent.
func BuyerItemInput(cfg model.Config, modelDir, vocabPath string, log *slog.Logger) func(items [][]byte, seq int) (model.Input, error) {
	if cfg.Family == model.ViT {
		return ItemInput(cfg, nil)
	}
	tok, err := Tokenizer(modelDir, vocabPath)
	if err == nil {
		err = cfg.CheckVocab(tok.Vocab())
	}
	if err != nil {
		log.Warn("the bootstrap's committed texts will not be compared with the tokens the data owner sends: no tokenizer of the target", "error", err)
		return nil
	}
	return ItemInput(cfg, tok)
}

// SubcommandFlags is the flag set of a party binary's subcommand (dataowner
// deliver, modelowner verify): -h prints its summary, the usage line and
// the flags to stderr.
func SubcommandFlags(name, summary, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nUsage: %s\n", summary, usage)
		fs.PrintDefaults()
	}
	return fs
}
