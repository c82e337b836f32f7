package main

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// The nonlinear ops of package protocol: sign/comparison, bit→arithmetic,
// ReLU, multiplexer, max and the CrypTen-style approximations. Inputs are
// drawn inside each function's documented range.
func init() {
	registerUnary("ltz", -100, 100, func(ctx context.Context, s *protocol.Session, x *share.Tensor) error {
		_, err := s.LTZ(ctx, x)
		return err
	})
	registerUnary("msb", -100, 100, func(ctx context.Context, s *protocol.Session, x *share.Tensor) error {
		_, err := s.MSB(ctx, x)
		return err
	})
	registerUnary("relu", -100, 100, func(ctx context.Context, s *protocol.Session, x *share.Tensor) error {
		_, err := s.ReLU(ctx, x)
		return err
	})
	registerUnary("trunc_relu", -100, 100, func(ctx context.Context, s *protocol.Session, x *share.Tensor) error {
		// The MLPs' fused truncation and ReLU (here by 2^f of a fixed-point x).
		_, err := s.TruncReLU(ctx, x, s.FixedPoint().FracBits)
		return err
	})
	registerUnary("exp", -16, 4, func(ctx context.Context, s *protocol.Session, x *share.Tensor) error {
		_, err := s.Exp(ctx, x)
		return err
	})
	registerUnary("reciprocal", 0.1, 100, func(ctx context.Context, s *protocol.Session, x *share.Tensor) error {
		_, err := s.Reciprocal(ctx, x) // CrypTen's default: sign handled
		return err
	})
	registerUnary("inv_sqrt", 0.1, 100, func(ctx context.Context, s *protocol.Session, x *share.Tensor) error {
		_, err := s.InvSqrt(ctx, x)
		return err
	})
	registerUnary("log", 0.01, 250, func(ctx context.Context, s *protocol.Session, x *share.Tensor) error {
		_, err := s.Log(ctx, x)
		return err
	})
	register(Op{
		Name:  "b2a",
		Shape: elementwise,
		Prepare: func(ctx context.Context, s *protocol.Session, sc Scale) (func(context.Context) error, error) {
			// Each party's random words are its XOR shares of random bits.
			n := sc.Elems()
			rng := rand.New(rand.NewPCG(uint64(n), uint64(31+s.Party())))
			b := &protocol.BitTensor{Shape: []int{n}, Words: make([]uint64, (n+63)/64)}
			for i := range b.Words {
				b.Words[i] = rng.Uint64()
			}
			return func(ctx context.Context) error { _, err := s.B2A(ctx, b); return err }, nil
		},
	})
	register(Op{
		Name:  "mux",
		Shape: elementwise,
		Prepare: func(ctx context.Context, s *protocol.Session, sc Scale) (func(context.Context) error, error) {
			n := sc.Elems()
			x, err := randomInput(s, -100, 100, n)
			if err != nil {
				return nil, err
			}
			rng := rand.New(rand.NewPCG(uint64(n), uint64(41+s.Party())))
			b := &protocol.BitTensor{Shape: []int{n}, Words: make([]uint64, (n+63)/64)}
			for i := range b.Words {
				b.Words[i] = rng.Uint64()
			}
			return func(ctx context.Context) error { _, err := s.MulBit(ctx, x, b); return err }, nil
		},
	})
	register(Op{
		Name:  "compare_reveal",
		Shape: elementwise,
		Prepare: func(ctx context.Context, s *protocol.Session, sc Scale) (func(context.Context) error, error) {
			x, err := randomInput(s, -100, 100, sc.Elems())
			if err != nil {
				return nil, err
			}
			// QuickSelect's use: every element against one shared pivot.
			pivot := x.Clone()
			for i := range pivot.Data {
				pivot.Data[i] = x.Data[0]
			}
			return func(ctx context.Context) error { _, err := s.CompareReveal(ctx, x, pivot); return err }, nil
		},
	})
	// Row-wise ops on attention-shaped logits: 12×128×128 (Full).
	rowwise := func(name string, f func(ctx context.Context, s *protocol.Session, x *share.Tensor) error) {
		dims := func(sc Scale) []int { return []int{sc.Pick(12, 2), sc.Pick(128, 8), sc.Pick(128, 16)} }
		register(Op{
			Name: name,
			Shape: func(sc Scale) (string, int) {
				d := dims(sc)
				return fmt.Sprintf("%d×%d×%d", d[0], d[1], d[2]), d[0] * d[1] * d[2]
			},
			Prepare: func(ctx context.Context, s *protocol.Session, sc Scale) (func(context.Context) error, error) {
				x, err := randomInput(s, -8, 8, dims(sc)...)
				if err != nil {
					return nil, err
				}
				return func(ctx context.Context) error { return f(ctx, s, x) }, nil
			},
		})
	}
	rowwise("softmax", func(ctx context.Context, s *protocol.Session, x *share.Tensor) error {
		_, err := s.Softmax(ctx, x)
		return err
	})
	rowwise("max", func(ctx context.Context, s *protocol.Session, x *share.Tensor) error {
		_, err := s.Max(ctx, x)
		return err
	})
	// Prediction entropy of classifier logits: 10000 candidates × 10 classes
	// (Full); n counts the entropies.
	entropyDims := func(sc Scale) (int, int) { return sc.Pick(10000, 32), 10 }
	register(Op{
		Name: "entropy",
		Shape: func(sc Scale) (string, int) {
			r, c := entropyDims(sc)
			return fmt.Sprintf("%d×%d", r, c), r
		},
		Prepare: func(ctx context.Context, s *protocol.Session, sc Scale) (func(context.Context) error, error) {
			r, c := entropyDims(sc)
			x, err := randomInput(s, -8, 8, r, c)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { _, err := s.Entropy(ctx, x); return err }, nil
		},
	})
}
