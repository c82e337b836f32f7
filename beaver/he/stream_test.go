package he

import (
	"bytes"
	"errors"
	"testing"
)

// TestWriteEncryptedWeights: the streamed encryption writes
// EncryptWeightsAt's encoding byte for byte (the same randomness), for a
// matrix of one ciphertext, of more than one group of weightStreamGroup,
// with KW rows a ciphertext and at an offset; WeightSizes counts it; a
// failing writer's error comes back.
func TestWriteEncryptedWeights(t *testing.T) {
	s := defaultScheme
	sk, _, err := s.KeyGen(newDetRand(1))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		k, n, off int
		l         Layout
	}{
		{"one ciphertext", 3, 5, 0, Layout{MW: 1, NW: 8}},
		{"groups", 17, 20, 0, Layout{MW: 1, NW: 16}},                      // 17·2 = 34 ciphertexts: a full group and a partial one
		{"kw rows at an offset", 40, 9, 21, Layout{MW: 1, NW: 16, KW: 4}}, // 10 row blocks × 2 column blocks
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			B := make([]uint64, c.k*c.n)
			for i := range B {
				B[i] = uint64(i)*0x9e3779b97f4a7c15 + 1
			}
			seed := [SeedSize]byte{7}
			ew, err := s.EncryptWeightsAt(sk, B, c.k, c.n, c.off, c.l, seed, newDetRand(9))
			if err != nil {
				t.Fatal(err)
			}
			want, err := ew.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			n, err := s.WriteEncryptedWeights(&got, sk, B, c.k, c.n, c.off, c.l, seed, newDetRand(9))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) || n != int64(len(want)) {
				t.Fatalf("streamed %d bytes (reported %d), differ from EncryptWeightsAt's %d", got.Len(), n, len(want))
			}
			if size := s.WeightSizes(c.k, c.n, c.off, c.l).Bytes; size != n {
				t.Errorf("WeightSizes %d, streamed %d", size, n)
			}
			boom := errors.New("boom")
			if _, err := s.WriteEncryptedWeights(failWriter{boom}, sk, B, c.k, c.n, c.off, c.l, seed, newDetRand(9)); !errors.Is(err, boom) {
				t.Errorf("a failing writer: %v", err)
			}
		})
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }
