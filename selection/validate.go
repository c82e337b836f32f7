package selection

import (
	"fmt"
	"math"

	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
)

// The checks below run before a party says anything to its peer, so that a
// setting or an input that would make the run fail later fails before the
// data owner has revealed its bootstrap sample. Their messages name
// settings, parameters and candidate numbers; they stay with the party (its
// error and log): the peer's abort carries the code AbortInput only.

// checkWeights checks that every parameter has as many values as its shape
// says and that all of them are finite.
func checkWeights(what string, ps []*nn.Param) error {
	for _, p := range ps {
		if p == nil || p.Value == nil {
			return fmt.Errorf("selection: %s: a parameter has no value", what)
		}
		n := 1
		for _, d := range p.Value.Shape {
			if d < 0 {
				return fmt.Errorf("selection: %s: parameter %s has shape %v", what, p.Name, p.Value.Shape)
			}
			n *= d
		}
		if n != len(p.Value.Data) {
			return fmt.Errorf("selection: %s: parameter %s has shape %v but %d values", what, p.Name, p.Value.Shape, len(p.Value.Data))
		}
		for i, v := range p.Value.Data {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("selection: %s: parameter %s holds a non-finite value at %d (NaN or ±Inf): fix the checkpoint", what, p.Name, i)
			}
		}
	}
	return nil
}

// check validates the model owner's inputs; it fills d.embHash and, when
// it generates proxies distilling on public texts (Generate.Public), d.seq:
// their sequence length, which its hello announces so that a data owner
// whose pool has another is refused before the coin.
func (d *modelOwnerRun) check() error {
	m, e := d.m, d
	if err := e.p.Validate(); err != nil {
		return err
	}
	if err := e.p.CheckLanes(); err != nil {
		return err
	}
	if err := e.checkProvider(); err != nil {
		return err
	}
	if m.Target != nil {
		if err := checkWeights("target model", m.Target.Params()); err != nil {
			return err
		}
	}
	e.embHash = m.EmbeddingHash
	if e.embHash == "" {
		src := m.Target
		if src == nil && len(m.Proxies) > 0 && m.Proxies[0] != nil {
			src = m.Proxies[0].Model
		}
		if src != nil {
			h, err := model.EmbeddingHash(src)
			if err != nil {
				return err
			}
			e.embHash = h
		}
	}
	if e.p.Appraisal == AppraiseThreshold {
		if _, err := e.p.FixedPoint.Encode(m.Threshold); err != nil {
			return fmt.Errorf("selection: model owner: appraisal threshold: %w", err)
		}
	}
	if m.Evaluator != nil {
		return nil
	}
	if m.Proxies != nil {
		if len(m.Proxies) != len(e.p.Schedule) {
			return fmt.Errorf("selection: model owner: %d proxies for %d phases", len(m.Proxies), len(e.p.Schedule))
		}
		for i, px := range m.Proxies {
			if px == nil || px.Model == nil {
				return fmt.Errorf("selection: model owner: proxy of phase %d missing", i+1)
			}
			if err := checkProxy(i, px, e.p.Schedule[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if m.Target == nil {
		return fmt.Errorf("selection: model owner: need a Target, Proxies or an Evaluator")
	}
	if pub := m.Generate.Public; len(pub.IDs) > 0 {
		e.seq = len(pub.IDs[0])
	}
	if m.Label == nil {
		return fmt.Errorf("selection: model owner: generating proxies needs a Label function (ModelOwner.Label) for the bootstrap sample")
	}
	if e.p.Bootstrap == 0 {
		return fmt.Errorf("selection: model owner: generating proxies needs a bootstrap sample (Params.Bootstrap > 0)")
	}
	cfg := m.generateConfig(e.p)
	if err := cfg.Validate(m.Target, e.p.Bootstrap); err != nil {
		return fmt.Errorf("selection: model owner: proxy generation settings (ModelOwner.Generate): %w", err)
	}
	return nil
}

// generateConfig is the proxy generation of a run: m.Generate with the
// schedule's phases and m's logger, its defaults resolved for the target and
// the bootstrap (proxy.Config.WithDefaults), so that the architectures
// announced before generation (generatedArchs) are those it makes.
func (m *ModelOwner) generateConfig(p Params) proxy.Config {
	cfg := m.Generate
	cfg.Phases = p.Shapes()
	if cfg.Logger == nil {
		cfg.Logger = m.Logger
	}
	return cfg.WithDefaults(m.Target, p.Bootstrap)
}

// checkProxy checks a proxy's weights and that its shape is the schedule's
// (zero fields of the schedule's proxy match any value).
func checkProxy(i int, px *proxy.Proxy, st Phase) error {
	if err := checkWeights(fmt.Sprintf("proxy of phase %d", i+1), px.Params()); err != nil {
		return err
	}
	sp, a := st.Proxy, px.Shape
	if sp.Layers != 0 && a.Layers != sp.Layers || sp.Heads != 0 && a.Heads != sp.Heads || sp.MLPHidden != 0 && a.MLPHidden != sp.MLPHidden {
		return fmt.Errorf("selection: model owner: the proxy of phase %d is ⟨%d, %d, %d⟩, the schedule says %+v", i+1, a.Layers, a.Heads, a.MLPHidden, sp)
	}
	return nil
}

// check validates the data owner's inputs; it fills r.eval (once: the
// substitute Evaluator or the embedding of the pool), r.archEmb, r.embHash
// and r.seq.
func (r *dataOwnerRun) check() error {
	d, e := r.d, r
	if err := e.p.Validate(); err != nil {
		return err
	}
	if err := e.p.CheckLanes(); err != nil {
		return err
	}
	if err := e.checkProvider(); err != nil {
		return err
	}
	if d.Evaluator != nil {
		e.eval = d.Evaluator
	} else {
		if d.Embedding == nil {
			return fmt.Errorf("selection: data owner: need the public Embedding model (or an Evaluator)")
		}
		if n := d.Pool.Len(); n != e.p.PoolSize {
			return fmt.Errorf("selection: data owner: the pool holds %d candidates, Params.PoolSize says %d", n, e.p.PoolSize)
		}
		if err := checkPool(d.Embedding.Config, d.Pool); err != nil {
			return err
		}
		e.eval = &dataEvaluator{emb: d.Embedding, pool: d.Pool}
		e.archEmb = &d.Embedding.Config
	}
	if d.Embedding != nil {
		if err := checkWeights("embedding model", d.Embedding.EmbeddingParams()); err != nil {
			return err
		}
		e.embHash = d.EmbeddingHash
		if e.embHash == "" {
			h, err := model.EmbeddingHash(d.Embedding)
			if err != nil {
				return err
			}
			e.embHash = h
		}
		if d.Embedding.Config.Family == model.ViT {
			e.seq = d.Embedding.Config.NumPatches() + 1
		} else if len(d.Pool.IDs) > 0 {
			e.seq = len(d.Pool.IDs[0])
		}
	} else {
		e.embHash = d.EmbeddingHash
	}
	return nil
}

// checkPool checks that every candidate fits the embedding model: images of
// the checkpoint's size with finite pixels, or token rows of one length
// within the vocabulary and positions, with matching mask and type rows.
func checkPool(cfg model.Config, pool model.Input) error {
	if _, err := pool.Select(nil); err != nil {
		return fmt.Errorf("selection: data owner: pool: %w", err)
	}
	if cfg.Family == model.ViT {
		if pool.Pixels == nil {
			return fmt.Errorf("selection: data owner: pool: the %s embedding needs images (Pool.Pixels)", cfg.Family)
		}
		want := cfg.NumChannels * cfg.ImageSize * cfg.ImageSize
		for i, img := range pool.Pixels {
			if len(img) != want {
				return fmt.Errorf("selection: data owner: pool: candidate %d has %d pixel values, the checkpoint wants %d", i, len(img), want)
			}
			for _, v := range img {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("selection: data owner: pool: candidate %d has a non-finite pixel", i)
				}
			}
		}
		return nil
	}
	if pool.Pixels != nil {
		return fmt.Errorf("selection: data owner: pool: the %s embedding needs token ids, not images", cfg.Family)
	}
	if len(pool.IDs) == 0 {
		return nil
	}
	seq := len(pool.IDs[0])
	if seq == 0 || seq > cfg.MaxPositions {
		return fmt.Errorf("selection: data owner: pool: sequences of %d tokens (the checkpoint takes 1 to %d)", seq, cfg.MaxPositions)
	}
	types := max(cfg.TypeVocabSize, 1)
	for i, row := range pool.IDs {
		if len(row) != seq {
			return fmt.Errorf("selection: data owner: pool: candidate %d has %d tokens, candidate 0 has %d (pad to one length)", i, len(row), seq)
		}
		for _, id := range row {
			if id < 0 || id >= cfg.VocabSize {
				return fmt.Errorf("selection: data owner: pool: candidate %d has a token id outside the vocabulary of %d", i, cfg.VocabSize)
			}
		}
		if pool.Mask != nil {
			if len(pool.Mask[i]) != seq {
				return fmt.Errorf("selection: data owner: pool: candidate %d has a mask of %d entries for %d tokens", i, len(pool.Mask[i]), seq)
			}
			for _, v := range pool.Mask[i] {
				if v != 0 && v != 1 {
					return fmt.Errorf("selection: data owner: pool: candidate %d has a mask entry other than 0 or 1", i)
				}
			}
		}
		if pool.TypeIDs != nil {
			if len(pool.TypeIDs[i]) != seq {
				return fmt.Errorf("selection: data owner: pool: candidate %d has %d token types for %d tokens", i, len(pool.TypeIDs[i]), seq)
			}
			for _, v := range pool.TypeIDs[i] {
				if v < 0 || v >= types {
					return fmt.Errorf("selection: data owner: pool: candidate %d has a token type outside [0, %d)", i, types)
				}
			}
		}
	}
	return nil
}
