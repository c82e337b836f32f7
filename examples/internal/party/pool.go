package party

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/wordpiece"
	"github.com/selectformer/selectformer/selection/pool"
)

// VocabFile, TokenizerFile and TokenizerConfigFile are the tokenizer files
// a text model directory may hold beside config.json (as Hugging Face
// checkpoints do): the WordPiece vocabulary as vocab.txt, or the whole
// tokenizer as tokenizer.json, and tokenizer_config.json's lower-casing.
const (
	VocabFile           = "vocab.txt"
	TokenizerFile       = "tokenizer.json"
	TokenizerConfigFile = "tokenizer_config.json"
)

// maxTokenizerConfig bounds tokenizer_config.json.
const maxTokenizerConfig = 1 << 20

// Tokenizer loads the WordPiece tokenizer of the text checkpoint in modelDir
// (see FindTokenizer).
func Tokenizer(modelDir, vocabPath string) (*wordpiece.Tokenizer, error) {
	tok, _, err := FindTokenizer(modelDir, vocabPath)
	return tok, err
}

// FindTokenizer loads the WordPiece tokenizer of the text checkpoint in
// modelDir and returns it with the path of the file it came from:
//
//   - vocabPath if not empty: a Hugging Face tokenizer.json if its name ends
//     in ".json" (wordpiece.LoadTokenizerJSON), else a vocab.txt;
//   - otherwise modelDir/vocab.txt, or, where the directory has none,
//     modelDir/tokenizer.json.
//
// A vocab.txt is lower-cased as modelDir/tokenizer_config.json's
// do_lower_case says (true without it, as for the uncased BERT
// checkpoints); a tokenizer.json as its own normalizer says.
func FindTokenizer(modelDir, vocabPath string) (*wordpiece.Tokenizer, string, error) {
	if vocabPath == "" {
		for _, name := range []string{VocabFile, TokenizerFile} {
			p := filepath.Join(modelDir, name)
			if _, err := os.Stat(p); err == nil || !errors.Is(err, fs.ErrNotExist) {
				vocabPath = p
				break
			}
		}
		if vocabPath == "" {
			return nil, "", fmt.Errorf("a text pool needs the checkpoint's WordPiece vocabulary: %s has neither %s nor %s; "+
				"copy the one published with the checkpoint (on its Hugging Face model page, under Files) into that directory, or give it with -vocab FILE",
				modelDir, VocabFile, TokenizerFile)
		}
	}
	if strings.HasSuffix(strings.ToLower(vocabPath), ".json") {
		tok, err := wordpiece.LoadTokenizerJSON(vocabPath)
		return tok, vocabPath, err
	}
	v, err := wordpiece.LoadVocab(vocabPath)
	if err != nil {
		return nil, "", err
	}
	lower := true
	f, err := os.Open(filepath.Join(modelDir, TokenizerConfigFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, "", fmt.Errorf("tokenizer config: %w", err)
	default:
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxTokenizerConfig+1))
		if err != nil {
			return nil, "", fmt.Errorf("tokenizer config: %w", err)
		}
		if len(b) > maxTokenizerConfig {
			return nil, "", fmt.Errorf("tokenizer config %s: larger than %d bytes", f.Name(), maxTokenizerConfig)
		}
		var c struct {
			DoLowerCase *bool `json:"do_lower_case"`
		}
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, "", fmt.Errorf("tokenizer config %s: %w", f.Name(), err)
		}
		if c.DoLowerCase != nil {
			lower = *c.DoLowerCase
		}
	}
	return wordpiece.NewTokenizer(v, lower), vocabPath, nil
}

// PoolInput reads the pool file at poolPath (package selection/pool: images
// or texts) and returns it as input of the checkpoint emb loaded from
// embDir. Texts are tokenized with the checkpoint's vocabulary (vocabPath,
// or embDir's vocab.txt or tokenizer.json: see FindTokenizer), which must
// match the checkpoint (model.Config.CheckVocab), to seq tokens (0: the
// checkpoint's maximum). Unreadable or mismatched files are ExitInput
// errors; -vocab or -seq with an image pool are usage errors.
func PoolInput(poolPath, embDir string, emb *model.Model, vocabPath string, seq int) (model.Input, pool.Kind, error) {
	p, in, err := ReadPool(poolPath, embDir, emb, vocabPath, seq)
	if err != nil {
		return model.Input{}, "", err
	}
	return in, p.Kind(), nil
}

// ReadPool is PoolInput that also returns the pool itself (its candidates'
// canonical bytes are what the data owner commits to and delivers).
func ReadPool(poolPath, embDir string, emb *model.Model, vocabPath string, seq int) (*pool.Pool, model.Input, error) {
	if seq < 0 {
		return nil, model.Input{}, peer.Usage("flag -seq must not be negative")
	}
	p, err := pool.ReadFile(poolPath)
	if err != nil {
		return nil, model.Input{}, peer.WithCode(peer.ExitInput, err)
	}
	var tok *wordpiece.Tokenizer
	switch p.Kind() {
	case pool.KindImages:
		if vocabPath != "" || seq != 0 {
			return nil, model.Input{}, peer.Usage("flags -vocab and -seq apply to text pools; %s is an image pool", poolPath)
		}
	case pool.KindTexts:
		if f := emb.Config.Family; f != model.BERT && f != model.DistilBERT {
			break // p.Input explains the mismatch
		}
		var from string
		if tok, from, err = FindTokenizer(embDir, vocabPath); err != nil {
			return nil, model.Input{}, peer.WithCode(peer.ExitInput, err)
		}
		if err := emb.Config.CheckVocab(tok.Vocab()); err != nil {
			return nil, model.Input{}, peer.WithCode(peer.ExitInput, fmt.Errorf("%s does not fit checkpoint %s: %w", from, embDir, err))
		}
	}
	in, err := p.Input(emb.Config, tok, seq)
	if err != nil {
		return nil, model.Input{}, peer.WithCode(peer.ExitInput, fmt.Errorf("%s with checkpoint %s: %w", poolPath, embDir, err))
	}
	return p, in, nil
}

// MaxPublic bounds the model owner's public inputs (-public FILE): each is
// distilled on in every epoch of every phase's in-vivo tuning, so a file of
// more would make proxy generation run for days, not hours.
const MaxPublic = 100_000

// PublicInput reads the model owner's public inputs (modelowner -public
// FILE: inputs it holds in the clear, no labels needed) from the file at
// path, in either pool format of package selection/pool (images for a ViT
// target, texts for a BERT or DistilBERT), bounded and checked as the data
// owner's pool is, and returns them as input of target (loaded from
// modelDir). Texts are tokenized with the checkpoint's vocabulary
// (vocabPath, or modelDir's vocab.txt or tokenizer.json) to seq tokens (0:
// the checkpoint's max_position_embeddings), which must be the data owner's
// -seq. More than MaxPublic inputs, or an unreadable or mismatched file, is
// an ExitInput error; -public-seq with images is a usage error.
func PublicInput(path, modelDir string, target *model.Model, vocabPath string, seq int) (model.Input, error) {
	if seq < 0 {
		return model.Input{}, peer.Usage("flag -public-seq must not be negative")
	}
	p, err := pool.ReadFile(path)
	if err != nil {
		return model.Input{}, peer.WithCode(peer.ExitInput, fmt.Errorf("-public: %w", err))
	}
	if n := p.Len(); n > MaxPublic {
		return model.Input{}, peer.WithCode(peer.ExitInput, fmt.Errorf("-public %s holds %d inputs, at most %d are taken: keep a sample of them", path, n, MaxPublic))
	}
	var tok *wordpiece.Tokenizer
	switch p.Kind() {
	case pool.KindImages:
		if seq != 0 {
			return model.Input{}, peer.Usage("flag -public-seq applies to text inputs; -public %s holds images", path)
		}
	case pool.KindTexts:
		if f := target.Config.Family; f != model.BERT && f != model.DistilBERT {
			break // p.Input explains the mismatch
		}
		var from string
		if tok, from, err = FindTokenizer(modelDir, vocabPath); err != nil {
			return model.Input{}, peer.WithCode(peer.ExitInput, fmt.Errorf("-public texts: %w", err))
		}
		if err := target.Config.CheckVocab(tok.Vocab()); err != nil {
			return model.Input{}, peer.WithCode(peer.ExitInput, fmt.Errorf("-public texts: %s does not fit the target in %s: %w", from, modelDir, err))
		}
	}
	in, err := p.Input(target.Config, tok, seq)
	if err != nil {
		return model.Input{}, peer.WithCode(peer.ExitInput, fmt.Errorf("-public %s with the target in %s: %w", path, modelDir, err))
	}
	return in, nil
}
