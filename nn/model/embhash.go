package model

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/selectformer/selectformer/nn"
)

// EmbeddingHash returns the hex SHA-256 of m's public embedding tables (token,
// position and type embeddings and the embedding LayerNorm, or ViT's patch
// projection, class token and position embeddings), with the family and
// hidden size. The selection handshake compares it, so that the data owner
// embeds its pool with exactly the tables the model owner's proxies were
// built on (the proxies share the target's embedding module): both parties
// must load the same checkpoint, and a target fine-tuned for the selection
// must keep its embeddings frozen. The other weights do not enter the hash.
func EmbeddingHash(m *Model) (string, error) {
	if m == nil {
		return "", fmt.Errorf("model: embedding hash of a nil model")
	}
	h := sha256.New()
	fmt.Fprintf(h, "family=%s hidden=%d\n", m.Config.Family, m.Config.Hidden)
	add := func(name string, p *nn.Param) {
		if p == nil || p.Value == nil {
			return
		}
		fmt.Fprintf(h, "%s %v\n", name, p.Value.Shape)
		var b [8]byte
		for _, v := range p.Value.Data {
			u := math.Float64bits(v)
			for i := range b {
				b[i] = byte(u >> (8 * i))
			}
			h.Write(b[:])
		}
	}
	if m.Word != nil {
		add("word", m.Word.Table)
	}
	if m.Position != nil {
		add("position", m.Position.Table)
	}
	if m.TokenType != nil {
		add("token_type", m.TokenType.Table)
	}
	if m.EmbLN != nil {
		add("emb_ln.gamma", m.EmbLN.Gamma)
		add("emb_ln.beta", m.EmbLN.Beta)
	}
	if m.Patch != nil {
		add("patch.w", m.Patch.W)
		add("patch.b", m.Patch.B)
	}
	add("cls", m.CLS)
	add("pos_emb", m.PosEmb)
	return hex.EncodeToString(h.Sum(nil)), nil
}
