package protocol

import (
	"context"
	"slices"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// TestRevealTo opens a shared tensor to each party in turn: the receiver
// gets the secret and sends nothing, the other party gets nil and sends one
// message of n words (msg(n), the package doc's table).
func TestRevealTo(t *testing.T) {
	secret := &share.Tensor{Shape: []int{3, 5}, Data: make([]uint64, 15)}
	for i := range secret.Data {
		secret.Data[i] = uint64(i)*0x9e3779b97f4a7c15 + 1
	}
	sh := splitTensor(secret, 4)
	for to := range 2 {
		r := runPair(t, func(ctx context.Context, s *Session) (*share.Tensor, error) {
			return s.RevealTo(ctx, to, sh[s.Party()])
		})
		got := r.Out[to]
		if got == nil || !slices.Equal(got.Shape, secret.Shape) || !slices.Equal(got.Data, secret.Data) {
			t.Fatalf("to %d: receiver got %+v, want the secret", to, got)
		}
		if r.Out[1-to] != nil {
			t.Fatalf("to %d: the sender got %+v, want nil", to, r.Out[1-to])
		}
		if sent := r.Stats[1-to].BytesSent; sent != MessageBytes(15) {
			t.Errorf("to %d: the sender sent %d bytes, want %d", to, sent, MessageBytes(15))
		}
		if sent := r.Stats[to].BytesSent; sent != 0 {
			t.Errorf("to %d: the receiver sent %d bytes, want 0", to, sent)
		}
	}
}
