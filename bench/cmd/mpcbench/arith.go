package main

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// elementwise describes an op on sc.Elems() elements.
func elementwise(sc Scale) (string, int) { n := sc.Elems(); return fmt.Sprint(n), n }

// registerUnary registers an elementwise op on n shared reals uniform in [lo, hi).
func registerUnary(name string, lo, hi float64, f func(ctx context.Context, s *protocol.Session, x *share.Tensor) error) {
	register(Op{
		Name:  name,
		Shape: elementwise,
		Prepare: func(ctx context.Context, s *protocol.Session, sc Scale) (func(context.Context) error, error) {
			x, err := randomInput(s, lo, hi, sc.Elems())
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { return f(ctx, s, x) }, nil
		},
	})
}

// registerBinary registers an elementwise op on two tensors of n shared reals
// uniform in [lo, hi).
func registerBinary(name string, lo, hi float64, f func(ctx context.Context, s *protocol.Session, x, y *share.Tensor) error) {
	register(Op{
		Name:  name,
		Shape: elementwise,
		Prepare: func(ctx context.Context, s *protocol.Session, sc Scale) (func(context.Context) error, error) {
			x, err := randomInput(s, lo, hi, sc.Elems())
			if err != nil {
				return nil, err
			}
			y, err := randomInput(s, lo, hi, sc.Elems())
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { return f(ctx, s, x, y) }, nil
		},
	})
}

// The arithmetic ops. Nonlinear ops register themselves in nonlinear.go.
func init() {
	registerBinary("mul", -100, 100, func(ctx context.Context, s *protocol.Session, x, y *share.Tensor) error {
		_, err := s.Mul(ctx, x, y)
		return err
	})
	registerUnary("mul_fixed", -100, 100, func(ctx context.Context, s *protocol.Session, x *share.Tensor) error {
		_, err := s.MulFixed(ctx, x, x)
		return err
	})
	registerUnary("square", -100, 100, func(ctx context.Context, s *protocol.Session, x *share.Tensor) error {
		_, err := s.Square(ctx, x)
		return err
	})
	registerUnary("trunc", -100, 100, func(ctx context.Context, s *protocol.Session, x *share.Tensor) error {
		_, err := s.Trunc(ctx, x)
		return err
	})
	matShape := func(sc Scale) (m, k, n int) { return sc.Pick(128, 4), sc.Pick(768, 8), sc.Pick(768, 6) }
	matDesc := func(sc Scale) (string, int) {
		m, k, n := matShape(sc)
		return fmt.Sprintf("%dx%d·%dx%d", m, k, k, n), m * n
	}
	register(Op{
		Name:  "matmul",
		Shape: matDesc,
		Prepare: func(ctx context.Context, s *protocol.Session, sc Scale) (func(context.Context) error, error) {
			m, k, n := matShape(sc)
			x, err := randomInput(s, -1, 1, m, k)
			if err != nil {
				return nil, err
			}
			y, err := randomInput(s, -1, 1, k, n)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { _, err := s.MatMul(ctx, x, y); return err }, nil
		},
	})
	register(Op{
		Name:  "matmul_weights",
		Shape: matDesc,
		Prepare: func(ctx context.Context, s *protocol.Session, sc Scale) (func(context.Context) error, error) {
			m, k, n := matShape(sc)
			x, err := randomInput(s, -1, 1, m, k)
			if err != nil {
				return nil, err
			}
			w, err := randomWeights(s, k, n)
			if err != nil {
				return nil, err
			}
			h, err := s.ShareWeight(ctx, 1, w, k, n) // once per weight matrix: not timed
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { _, err := s.MatMulWeights(ctx, x, h); return err }, nil
		},
	})
}
