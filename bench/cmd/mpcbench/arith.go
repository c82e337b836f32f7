package main

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/protocol"
)

// The arithmetic ops. Nonlinear ops register themselves in nonlinear.go.
func init() {
	elementwise := func(sc Scale) (string, int) { n := sc.Elems(); return fmt.Sprint(n), n }
	register(Op{
		Name:  "mul",
		Shape: elementwise,
		Prepare: func(ctx context.Context, s *protocol.Session, sc Scale) (func(context.Context) error, error) {
			x, err := randomInput(s, -100, 100, sc.Elems())
			if err != nil {
				return nil, err
			}
			y, err := randomInput(s, -100, 100, sc.Elems())
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { _, err := s.Mul(ctx, x, y); return err }, nil
		},
	})
	register(Op{
		Name:  "mul_fixed",
		Shape: elementwise,
		Prepare: func(ctx context.Context, s *protocol.Session, sc Scale) (func(context.Context) error, error) {
			x, err := randomInput(s, -100, 100, sc.Elems())
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { _, err := s.MulFixed(ctx, x, x); return err }, nil
		},
	})
	register(Op{
		Name:  "square",
		Shape: elementwise,
		Prepare: func(ctx context.Context, s *protocol.Session, sc Scale) (func(context.Context) error, error) {
			x, err := randomInput(s, -100, 100, sc.Elems())
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { _, err := s.Square(ctx, x); return err }, nil
		},
	})
	register(Op{
		Name:  "trunc",
		Shape: elementwise,
		Prepare: func(ctx context.Context, s *protocol.Session, sc Scale) (func(context.Context) error, error) {
			x, err := randomInput(s, -100, 100, sc.Elems())
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { _, err := s.Trunc(ctx, x); return err }, nil
		},
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
