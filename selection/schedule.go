package selection

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/selectformer/selectformer/proxy"
)

// MaxScheduleShape bounds each of l, w and d in a parsed schedule.
const MaxScheduleShape = 1 << 16

// ParseSchedule parses a schedule written as comma-separated phases
// "l:w:d@keep" (the form of the peer binaries' -schedule flag), e.g.
// "1:4:8@0.3,2:4:16": phase 1 runs a proxy of 1 layer, 4 heads and MLP
// width 8 and keeps 30% of the candidates; phase 2 runs 2 layers, 4 heads,
// width 16 and keeps the budget. l, w and d are integers in
// [1, MaxScheduleShape]. Every phase but the last needs its @keep, a
// fraction in (0, 1]; the last may omit it (it keeps Budget − Bootstrap
// whatever its Keep, which is then 1). A phase may end in "/lanes", its
// own number of batch lanes (Phase.Workers, 1..MaxWorkers), e.g.
// "1:1:2@0.3/64,3:12:16/16"; without it the phase runs Params.Workers.
// The lanes may be followed by "xsize", the phase's own batch size
// (Phase.BatchSize, 1..MaxBatchSize; lanes times size is what the phase
// has in flight), and the lanes may be left out to keep the run's:
// "1:1:2@0.3/60x16" runs phase 1 on 60 lanes of 16 candidates a batch,
// "1:1:2@0.3/x16" on Params.Workers lanes of 16; without it the phase's
// batches are Params.BatchSize. Spaces around the parts are ignored. The result is Params.Schedule;
// FormatSchedule writes it back.
func ParseSchedule(s string) ([]Phase, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("selection: schedule: empty")
	}
	parts := strings.Split(s, ",")
	out := make([]Phase, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		body, lanes, hasLanes := strings.Cut(p, "/")
		shape, keep, hasKeep := strings.Cut(body, "@")
		f := strings.Split(shape, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("selection: schedule: phase %d %q: want l:w:d[@keep][/[lanes][xsize]]", i+1, p)
		}
		var ph Phase
		if hasLanes {
			lanes, size, hasSize := strings.Cut(lanes, "x")
			if lanes = strings.TrimSpace(lanes); lanes != "" || !hasSize {
				v, err := strconv.Atoi(lanes)
				if err != nil || v < 1 || v > MaxWorkers {
					return nil, fmt.Errorf("selection: schedule: phase %d %q: lanes %q is not an integer in [1, %d]", i+1, p, lanes, MaxWorkers)
				}
				ph.Workers = v
			}
			if hasSize {
				v, err := strconv.Atoi(strings.TrimSpace(size))
				if err != nil || v < 1 || v > MaxBatchSize {
					return nil, fmt.Errorf("selection: schedule: phase %d %q: batch size %q is not an integer in [1, %d]", i+1, p, size, MaxBatchSize)
				}
				ph.BatchSize = v
			}
		}
		for j, dst := range []*int{&ph.Proxy.Layers, &ph.Proxy.Heads, &ph.Proxy.MLPHidden} {
			v, err := strconv.Atoi(strings.TrimSpace(f[j]))
			if err != nil || v < 1 || v > MaxScheduleShape {
				return nil, fmt.Errorf("selection: schedule: phase %d %q: %q is not a positive integer up to %d", i+1, p, f[j], MaxScheduleShape)
			}
			*dst = v
		}
		last := i == len(parts)-1
		switch {
		case hasKeep:
			v, err := strconv.ParseFloat(strings.TrimSpace(keep), 64)
			if err != nil || !(v > 0 && v <= 1) {
				return nil, fmt.Errorf("selection: schedule: phase %d %q: keep fraction %q not in (0, 1]", i+1, p, keep)
			}
			ph.Keep = v
		case !last:
			return nil, fmt.Errorf("selection: schedule: phase %d %q: needs @keep (the fraction of candidates that survive it)", i+1, p)
		default:
			ph.Keep = 1
		}
		out = append(out, ph)
	}
	return out, nil
}

// FormatSchedule writes phases in the form ParseSchedule reads ("l:w:d@keep"
// for every phase, comma-separated; Keep with the fewest digits that parse
// back to the same value; "/lanes" after a phase with its own Workers,
// "xsize" after it with its own BatchSize: "/60x16", or "/x16" with the
// run's lanes).
func FormatSchedule(phases []Phase) string {
	parts := make([]string, len(phases))
	for i, ph := range phases {
		parts[i] = formatShape(ph.Proxy) + "@" + strconv.FormatFloat(ph.Keep, 'g', -1, 64)
		if ph.Workers != 0 || ph.BatchSize != 0 {
			parts[i] += "/"
		}
		if ph.Workers != 0 {
			parts[i] += strconv.Itoa(ph.Workers)
		}
		if ph.BatchSize != 0 {
			parts[i] += "x" + strconv.Itoa(ph.BatchSize)
		}
	}
	return strings.Join(parts, ",")
}

func formatShape(s proxy.Shape) string {
	return fmt.Sprintf("%d:%d:%d", s.Layers, s.Heads, s.MLPHidden)
}
