package peer

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/transport"
)

// PhaseSpec is one phase of a schedule flag: the proxy shape ⟨l, w, d⟩ and
// the fraction of the candidates that survive the phase (ignored for the last
// phase, which keeps budget − bootstrap).
type PhaseSpec struct {
	Layers, Heads, Hidden int
	Keep                  float64
}

// ParseSchedule parses a schedule flag: comma-separated phases
// "l:w:d@keep", e.g. "1:4:8@0.3,2:4:16" (phase 1: 1 layer, 4 heads, MLP width
// 8, keep 30% of the candidates; phase 2: 2 layers, 4 heads, width 16, keep
// the budget). Every phase but the last needs its @keep in (0, 1]; the last
// may omit it.
func ParseSchedule(s string) ([]PhaseSpec, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("empty schedule")
	}
	parts := strings.Split(s, ",")
	out := make([]PhaseSpec, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		shape, keep, hasKeep := strings.Cut(p, "@")
		f := strings.Split(shape, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("phase %d %q: want l:w:d[@keep]", i+1, p)
		}
		var ph PhaseSpec
		for j, dst := range []*int{&ph.Layers, &ph.Heads, &ph.Hidden} {
			v, err := strconv.Atoi(strings.TrimSpace(f[j]))
			if err != nil || v < 1 || v > 1<<16 {
				return nil, fmt.Errorf("phase %d %q: %q is not a positive integer", i+1, p, f[j])
			}
			*dst = v
		}
		last := i == len(parts)-1
		switch {
		case hasKeep:
			v, err := strconv.ParseFloat(strings.TrimSpace(keep), 64)
			if err != nil || !(v > 0 && v <= 1) {
				return nil, fmt.Errorf("phase %d %q: keep fraction %q not in (0, 1]", i+1, p, keep)
			}
			ph.Keep = v
		case !last:
			return nil, fmt.Errorf("phase %d %q: needs @keep (the fraction of candidates that survive it)", i+1, p)
		default:
			ph.Keep = 1
		}
		out = append(out, ph)
	}
	return out, nil
}

// ConnectDealer connects to the networked dealer at addr (pinned by
// fingerprint) as party and returns the party's provider and the dealer
// connection (close it when done). Failures are ExitPeer errors.
func ConnectDealer(ctx context.Context, addr string, id *transport.Identity, fingerprint string, party int, opt transport.Options, e Endpoint) (*beaver.Client, *transport.Conn, error) {
	e.Connect, e.Listen = addr, ""
	conn, err := Establish(ctx, e, id, fingerprint, opt, discard, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("dealer: %w", err)
	}
	cl, err := beaver.Connect(ctx, conn, party)
	if err != nil {
		_ = conn.Close()
		return nil, nil, &Error{Code: ExitPeer, Err: fmt.Errorf("dealer handshake: %w", err)}
	}
	return cl, conn, nil
}
