package dataset

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// MNISTSubset draws perClass images of each of the 10 digits from all
// (deterministically for a seed) and returns them in a shuffled order, pixels
// quantised to multiples of 1/255 as in the committed file.
func MNISTSubset(all *ImageSet, perClass int, seed uint64) (*ImageSet, error) {
	if len(all.Labels) != len(all.Images) {
		return nil, fmt.Errorf("mnist subset: %d labels for %d images", len(all.Labels), len(all.Images))
	}
	rng := NewRand(seed)
	idx, err := BalancedSample(all.Labels, Indices(len(all.Labels)), 10, perClass, rng)
	if err != nil {
		return nil, fmt.Errorf("mnist subset: %w", err)
	}
	s, err := all.Subset(idx)
	if err != nil {
		return nil, fmt.Errorf("mnist subset: %w", err)
	}
	for i, img := range s.Images {
		q := make([]float64, len(img))
		for j, p := range img {
			q[j] = math.Round(p*255) / 255
		}
		s.Images[i] = q
	}
	return s, nil
}

// SpamSubset draws up to perClass messages of each class from raw (a TextSet
// of raw e-mails, e.g. from LoadSpamAssassinPackage), reduces each with
// MessageText(text, maxBytes), skips reductions with an empty body or
// already taken, and returns the result shuffled. It is deterministic for a
// seed.
func SpamSubset(raw *TextSet, perClass, maxBytes int, seed uint64) (*TextSet, error) {
	if len(raw.Labels) != len(raw.Texts) {
		return nil, fmt.Errorf("spam subset: %d labels for %d texts", len(raw.Labels), len(raw.Texts))
	}
	rng := NewRand(seed)
	groups, err := ByClass(raw.Labels, Indices(len(raw.Labels)), len(raw.ClassNames))
	if err != nil {
		return nil, fmt.Errorf("spam subset: %w", err)
	}
	out := &TextSet{ClassNames: slices.Clone(raw.ClassNames)}
	seen := map[string]bool{}
	for c, g := range groups {
		taken := 0
		for _, i := range Shuffled(g, rng) {
			if taken == perClass {
				break
			}
			t := MessageText(raw.Texts[i], maxBytes)
			if _, body, _ := strings.Cut(t, "\n\n"); body == "" || seen[t] {
				continue
			}
			seen[t] = true
			out.Texts = append(out.Texts, t)
			out.Labels = append(out.Labels, c)
			taken++
		}
	}
	order := Shuffled(Indices(len(out.Texts)), rng)
	shuffled, err := out.Subset(order)
	if err != nil {
		return nil, fmt.Errorf("spam subset: %w", err)
	}
	return shuffled, nil
}
