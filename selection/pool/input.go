package pool

import (
	"errors"
	"fmt"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/wordpiece"
)

// Input returns the pool as the input of a checkpoint with configuration
// cfg, candidate i at position i, after checking that it fits:
//
//   - an image pool needs a ViT whose image size is the images' (square)
//     size; pixels are normalised to [-1, 1] and a grey image is repeated
//     over the checkpoint's channels, as the Hugging Face ViT processor does;
//     images of several channels need as many in the checkpoint;
//   - a text pool needs a BERT or DistilBERT checkpoint and its WordPiece
//     tokenizer tok, whose vocabulary must match the checkpoint (see
//     model.Config.CheckVocab); each text becomes
//     [CLS] text [SEP], truncated and padded to seq tokens (0: the
//     checkpoint's MaxPositions).
func (p *Pool) Input(cfg model.Config, tok *wordpiece.Tokenizer, seq int) (model.Input, error) {
	switch {
	case p.Images != nil:
		s := p.Images
		if cfg.Family != model.ViT {
			return model.Input{}, fmt.Errorf("pool input: an image pool needs a %s checkpoint, not %s", model.ViT, familyName(cfg.Family))
		}
		if cfg.ImageSize != s.Width || cfg.ImageSize != s.Height {
			return model.Input{}, fmt.Errorf("pool input: images of %d×%d do not fit the checkpoint's image size %d×%d", s.Width, s.Height, cfg.ImageSize, cfg.ImageSize)
		}
		if cfg.NumChannels < 1 {
			return model.Input{}, fmt.Errorf("pool input: the checkpoint has %d channels", cfg.NumChannels)
		}
		switch c := s.NumChannels(); {
		case c == 1:
			return model.NormalizeImages(s.Pixels, cfg.NumChannels), nil
		case c == cfg.NumChannels:
			return model.NormalizeImages(s.Pixels, 1), nil
		default:
			return model.Input{}, fmt.Errorf("pool input: the images have %d channels, the checkpoint takes %d (num_channels): build the pool with %d channels (mkpool images -channels %d)", c, cfg.NumChannels, cfg.NumChannels, cfg.NumChannels)
		}
	case p.Texts != nil:
		if cfg.Family != model.BERT && cfg.Family != model.DistilBERT {
			return model.Input{}, fmt.Errorf("pool input: a text pool needs a %s or %s checkpoint, not %s", model.BERT, model.DistilBERT, familyName(cfg.Family))
		}
		if tok == nil {
			return model.Input{}, errors.New("pool input: a text pool needs the checkpoint's WordPiece tokenizer (vocab.txt)")
		}
		if err := cfg.CheckVocab(tok.Vocab()); err != nil {
			return model.Input{}, fmt.Errorf("pool input: %w", err)
		}
		if seq == 0 {
			seq = cfg.MaxPositions
		}
		if seq < 2 || seq > cfg.MaxPositions {
			return model.Input{}, fmt.Errorf("pool input: sequence length %d outside [2, %d] (the checkpoint's max_position_embeddings)", seq, cfg.MaxPositions)
		}
		in, err := model.EncodeTexts(tok, p.Texts.Texts, seq)
		if err != nil {
			return model.Input{}, fmt.Errorf("pool input: %w", err)
		}
		return in, nil
	}
	return model.Input{}, errors.New("pool input: empty pool")
}

func familyName(f model.Family) string {
	if f == "" {
		return "a checkpoint without model_type"
	}
	return "a " + string(f)
}
