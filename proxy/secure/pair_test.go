package secure

import (
	"context"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

// localConfig configures runLocal: the encoding (default
// share.DefaultFixedPoint) and the dealer seeds (zero: random).
type localConfig struct {
	FixedPoint share.FixedPoint
	Seeds      [2]share.Seed
}

// runLocal runs f as both parties on two sessions (stream 1) of a
// twoparty.Run and returns both outputs; the error names the party that
// failed first.
func runLocal[T any](ctx context.Context, cfg localConfig, f func(ctx context.Context, s *protocol.Session) (T, error)) ([2]T, error) {
	if cfg.FixedPoint == (share.FixedPoint{}) {
		cfg.FixedPoint = share.DefaultFixedPoint
	}
	r, err := twoparty.Run(ctx, twoparty.Config{Seeds: cfg.Seeds}, func(ctx context.Context, p *twoparty.Party) (T, error) {
		s, err := protocol.NewSession(ctx, p.ID, p.Conn.Stream(1), p.Provider, cfg.FixedPoint)
		if err != nil {
			var zero T
			return zero, err
		}
		return f(ctx, s)
	})
	return r.Out, err
}

// dataOwnerInput secret-shares the data owner's values xs (party 1 encodes
// and shares them; party 0 receives its share of the same shape).
func dataOwnerInput(s *protocol.Session, xs []float64, shape ...int) (*share.Tensor, error) {
	if s.Party() != 1 {
		return s.ShareInput(1, nil, shape...)
	}
	enc, err := s.FixedPoint().EncodeTensor(xs, shape...)
	if err != nil {
		return nil, err
	}
	return s.ShareInput(1, enc)
}
