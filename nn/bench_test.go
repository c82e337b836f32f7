package nn

import (
	"fmt"
	"testing"
)

// tinyEncoder is an embedding, a stack of blocks and a linear classifier on the
// first token: the shape of a BERT-family classifier, for the throughput benchmark.
type tinyEncoder struct {
	emb    *Embedding
	blocks []*Block
	head   *Linear
	b, t   int
}

func newTinyEncoder(vocab, dim, heads, layers, classes int, seed uint64) (*tinyEncoder, error) {
	rng := NewRNG(seed)
	m := &tinyEncoder{emb: NewEmbedding("emb", vocab, dim, rng), head: NewLinear("head", dim, classes, true, rng)}
	for i := 0; i < layers; i++ {
		p := fmt.Sprintf("layer.%d.", i)
		b, err := NewBlock(BlockConfig{Dim: dim, Heads: heads, Intermediate: 4 * dim, Eps: 1e-12, Act: "gelu", HiddenDropout: 0.1, AttentionDropout: 0.1},
			BlockNames{p + "q", p + "k", p + "v", p + "o", p + "ln1", p + "ln2", p + "fi", p + "fo"}, rng)
		if err != nil {
			return nil, err
		}
		m.blocks = append(m.blocks, b)
	}
	return m, nil
}

func (m *tinyEncoder) params() []*Param {
	ps := m.emb.Params()
	for _, b := range m.blocks {
		ps = append(ps, b.Params()...)
	}
	return append(ps, m.head.Params()...)
}

// step runs one training step on ids [b, t] and returns the loss.
func (m *tinyEncoder) step(ids []int, b, t int, labels []int, opt *AdamW) (float64, error) {
	ps := m.params()
	ZeroGrad(ps)
	x, err := m.emb.Forward(ids, b, t)
	if err != nil {
		return 0, err
	}
	for _, blk := range m.blocks {
		blk.SetTraining(true)
		if x, err = blk.Forward(x, nil); err != nil {
			return 0, err
		}
	}
	d := x.Cols()
	cls := New(b, d)
	for i := 0; i < b; i++ {
		copy(cls.Data[i*d:(i+1)*d], x.Data[i*t*d:i*t*d+d])
	}
	logits, err := m.head.Forward(cls)
	if err != nil {
		return 0, err
	}
	loss, dl, err := CrossEntropy(logits, labels)
	if err != nil {
		return 0, err
	}
	dcls, err := m.head.Backward(dl)
	if err != nil {
		return 0, err
	}
	dx := New(b, t, d)
	for i := 0; i < b; i++ {
		copy(dx.Data[i*t*d:i*t*d+d], dcls.Data[i*d:(i+1)*d])
	}
	for i := len(m.blocks) - 1; i >= 0; i-- {
		if dx, err = m.blocks[i].Backward(dx); err != nil {
			return 0, err
		}
	}
	if err := m.emb.Backward(dx); err != nil {
		return 0, err
	}
	_, err = opt.Step(ps)
	return loss, err
}

// BenchmarkTrainStep measures training throughput (forward, backward, AdamW) of a
// 2-layer, 128-hidden, 4-head encoder on sequences of 64 tokens, batch 16.
func BenchmarkTrainStep(b *testing.B) {
	const batch, seq = 16, 64
	m, err := newTinyEncoder(1000, 128, 4, 2, 2, 1)
	if err != nil {
		b.Fatal(err)
	}
	rng := NewRNG(2)
	ids := make([]int, batch*seq)
	for i := range ids {
		ids[i] = rng.IntN(1000)
	}
	labels := make([]int, batch)
	for i := range labels {
		labels[i] = i % 2
	}
	opt := &AdamW{LR: 1e-4, ClipNorm: 1}
	b.ResetTimer()
	for b.Loop() {
		if _, err := m.step(ids, batch, seq, labels, opt); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "samples/s")
}

func TestTinyEncoderLearns(t *testing.T) {
	// The label is whether token 1 occurs in the sequence: attention must find it.
	const batch, seq = 16, 8
	m, err := newTinyEncoder(10, 16, 2, 1, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	rng := NewRNG(4)
	opt := &AdamW{LR: 3e-3, WarmupSteps: 20, TotalSteps: 300, ClipNorm: 1, WeightDecay: 0.01}
	var last float64
	for s := 0; s < 300; s++ {
		ids := make([]int, batch*seq)
		labels := make([]int, batch)
		for i := 0; i < batch; i++ {
			labels[i] = rng.IntN(2)
			ids[i*seq] = 0 // a CLS-like token
			for j := 1; j < seq; j++ {
				ids[i*seq+j] = 2 + rng.IntN(8)
			}
			if labels[i] == 1 {
				ids[i*seq+1+rng.IntN(seq-1)] = 1
			}
		}
		loss, err := m.step(ids, batch, seq, labels, opt)
		if err != nil {
			t.Fatal(err)
		}
		last = 0.9*last + 0.1*loss
		if s == 0 {
			last = loss
		}
	}
	if last > 0.2 {
		t.Fatalf("smoothed loss after training %.3f, want < 0.2", last)
	}
}
