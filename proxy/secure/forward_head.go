package secure

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// The head: the class token through the final LayerNorm (ViT) or the
// pooler (BERT, DistilBERT), then the classifier and the selection score.

// head maps the encoder output's class token to the entropy.
func (p *Prepared) head(ctx context.Context, s *protocol.Session, x *share.Tensor) (*share.Tensor, error) {
	a := p.arch
	B := x.Shape[0]
	cls, err := reshape(firstToken(x), B, a.Hidden)
	if err != nil {
		return nil, err
	}
	var z *share.Tensor
	if p.final != nil {
		if z, err = p.layerNorm(ctx, s, cls, p.final); err != nil {
			return nil, fmt.Errorf("final layernorm: %w", err)
		}
	} else {
		if a.TanhPooler {
			if z, err = p.lin(ctx, s, cls, *p.pooler); err == nil {
				z, err = p.tanh(ctx, s, z)
			}
		} else {
			z, err = p.linReLU(ctx, s, cls, *p.pooler, nil)
		}
		if err != nil {
			return nil, fmt.Errorf("pooler: %w", err)
		}
	}
	return p.entropy(ctx, s, z)
}

// entropy maps the head's features z [B, hidden] to the shared scores of
// the selection criterion [B] (the entropies by default). With the entropy
// MLP, its first layer is the classifier folded into it (prepareHead):
// z·W' + b' → TruncReLU → ·W2 + b2, truncation (1 + 7 + 1 + 1 rounds); the
// logits are never computed. With the exact score: the classifier (2
// rounds), then the criterion's exact score over MPC (RegisterExactScore;
// protocol.Entropy for the entropy).
func (p *Prepared) entropy(ctx context.Context, s *protocol.Session, z *share.Tensor) (*share.Tensor, error) {
	B := z.Shape[0]
	if p.ent == nil {
		exact, err := exactScore(p.arch.Criterion)
		if err != nil {
			return nil, err
		}
		logits, err := p.lin(ctx, s, z, *p.cls)
		if err != nil {
			return nil, fmt.Errorf("classifier: %w", err)
		}
		return exact(ctx, s, logits)
	}
	h, err := p.mlp(ctx, s, z, p.ent, nil)
	if err != nil {
		return nil, fmt.Errorf("classifier and entropy mlp: %w", err)
	}
	return reshape(h, B)
}
