package model

import (
	"testing"
)

// TestEmbeddingHash: the hash depends on the embedding tables and only on
// them: the same seed gives the same hash, a changed embedding value (token
// table, ViT patch projection) another one, a changed encoder weight or
// classifier the same one; a nil model is an error.
func TestEmbeddingHash(t *testing.T) {
	for _, f := range []Family{BERT, DistilBERT, ViT} {
		t.Run(string(f), func(t *testing.T) {
			mk := func(seed uint64) *Model {
				m, err := New(tinyConfig(f), seed)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			hash := func(m *Model) string {
				h, err := EmbeddingHash(m)
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
			base := hash(mk(1))
			if got := hash(mk(1)); got != base {
				t.Fatal("same checkpoint, different hashes")
			}
			if got := hash(mk(2)); got == base {
				t.Error("other embeddings, same hash")
			}
			m := mk(1)
			for _, p := range m.Params() {
				if !isEmbedding(m, p.Name) {
					p.Value.Data[0] += 1 // fine-tuning outside the embeddings
				}
			}
			if got := hash(m); got != base {
				t.Error("a non-embedding weight changed the hash")
			}
			m = mk(1)
			emb := m.EmbeddingParams()
			if len(emb) == 0 {
				t.Fatal("no embedding parameters")
			}
			emb[0].Value.Data[0] += 1e-9
			if got := hash(m); got == base {
				t.Error("a changed embedding value kept the hash")
			}
		})
	}
	if _, err := EmbeddingHash(nil); err == nil {
		t.Error("nil model: no error")
	}
}

func isEmbedding(m *Model, name string) bool {
	for _, p := range m.EmbeddingParams() {
		if p.Name == name {
			return true
		}
	}
	return false
}
