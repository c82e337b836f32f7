package selection

import (
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/proxy"
)

func ph(l, w, d int, keep float64) Phase {
	return Phase{Proxy: proxy.Shape{Layers: l, Heads: w, MLPHidden: d}, Keep: keep}
}

// phw is ph with the phase's own lanes.
func phw(l, w, d int, keep float64, lanes int) Phase {
	p := ph(l, w, d, keep)
	p.Workers = lanes
	return p
}

// phb is phw with the phase's own batch size (lanes 0: the run's).
func phb(l, w, d int, keep float64, lanes, size int) Phase {
	p := phw(l, w, d, keep, lanes)
	p.BatchSize = size
	return p
}

func TestParseSchedule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Phase
		err  string
	}{
		{"1:4:8@0.3,2:4:16", []Phase{ph(1, 4, 8, 0.3), ph(2, 4, 16, 1)}, ""},
		{" 2:2:4 ", []Phase{ph(2, 2, 4, 1)}, ""},
		{"1:4:8@0.5, 1 : 4 : 8 @ 0.2 ,2:4:16@1", []Phase{ph(1, 4, 8, 0.5), ph(1, 4, 8, 0.2), ph(2, 4, 16, 1)}, ""},
		{"", nil, "empty"},
		{"1:4", nil, "l:w:d"},
		{"1:4:8:2", nil, "l:w:d"},
		{"1:4:8,2:4:16", nil, "needs @keep"},
		{"0:4:8", nil, "positive"},
		{"1:x:8", nil, "positive"},
		{"1:4:65537", nil, "positive"},
		{"1:4:8@0,2:4:16", nil, "keep fraction"},
		{"1:4:8@1.5,2:4:16", nil, "keep fraction"},
		{"1:4:8@NaN,2:4:16", nil, "keep fraction"},
		{"1:4:8@0.3,", nil, "l:w:d"},
		{"1:1:2@0.3/64,3:12:16/16", []Phase{phw(1, 1, 2, 0.3, 64), phw(3, 12, 16, 1, 16)}, ""},
		{"1:1:2@0.3 / 4 ,3:12:16", []Phase{phw(1, 1, 2, 0.3, 4), ph(3, 12, 16, 1)}, ""},
		{"1:1:2@0.3/0,3:12:16", nil, "lanes"},
		{"1:1:2@0.3/65,3:12:16", nil, "lanes"},
		{"1:1:2/4@0.3,3:12:16", nil, "lanes"},
		{"1:1:2@0.3/60x16,3:12:16/16", []Phase{phb(1, 1, 2, 0.3, 60, 16), phw(3, 12, 16, 1, 16)}, ""},
		{"1:1:2@0.3/x16,3:12:16/x4", []Phase{phb(1, 1, 2, 0.3, 0, 16), phb(3, 12, 16, 1, 0, 4)}, ""},
		{"1:1:2@0.3/ 8 x 65536 ,3:12:16", []Phase{phb(1, 1, 2, 0.3, 8, 65536), ph(3, 12, 16, 1)}, ""},
		{"1:1:2@0.3/", nil, "lanes"},
		{"1:1:2@0.3/x,3:12:16", nil, "batch size"},
		{"1:1:2@0.3/60x,3:12:16", nil, "batch size"},
		{"1:1:2@0.3/60x0,3:12:16", nil, "batch size"},
		{"1:1:2@0.3/60x65537,3:12:16", nil, "batch size"},
		{"1:1:2@0.3/60x16x2,3:12:16", nil, "batch size"},
		{"1:1:2@0.3/60x-4,3:12:16", nil, "batch size"},
		{"1:1:2@0.3/0x16,3:12:16", nil, "lanes"},
		{"1:1:2@0.3/65x16,3:12:16", nil, "lanes"},
		{"1:1:2@0.3/60*16,3:12:16", nil, "lanes"},
	} {
		got, err := ParseSchedule(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSchedule(%q) error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseSchedule(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if back, err := ParseSchedule(FormatSchedule(got)); err != nil || !slices.Equal(back, got) {
			t.Errorf("FormatSchedule(%v) = %q parses as %v, %v", got, FormatSchedule(got), back, err)
		}
	}
}

// FuzzParseSchedule: whatever ParseSchedule accepts has shapes in range,
// keep fractions in (0, 1], lanes and batch sizes in range (or 0: the
// run's), and survives FormatSchedule unchanged.
func FuzzParseSchedule(f *testing.F) {
	for _, s := range []string{"1:4:8@0.3,2:4:16", "1:1:1@1e-3,", " 2:2:4 ", "1:4:8@0.5,1:4:8@0.2,2:4:16@1", "3:3:3@0x1p-2", "1:1:2@0.3/64,3:12:16/16", "1:1:2@0.3/60x16,3:12:16/x4", "1:1:2@0.3/x,3:12:16/0x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		phases, err := ParseSchedule(s)
		if err != nil {
			return
		}
		if len(phases) == 0 {
			t.Fatalf("%q accepted as an empty schedule", s)
		}
		for _, p := range phases {
			sh := p.Proxy
			if sh.Layers < 1 || sh.Heads < 1 || sh.MLPHidden < 1 || max(sh.Layers, sh.Heads, sh.MLPHidden) > MaxScheduleShape || !(p.Keep > 0 && p.Keep <= 1) || p.Workers < 0 || p.Workers > MaxWorkers || p.BatchSize < 0 || p.BatchSize > MaxBatchSize {
				t.Fatalf("%q accepted as %+v", s, phases)
			}
		}
		back, err := ParseSchedule(FormatSchedule(phases))
		if err != nil || !slices.Equal(back, phases) {
			t.Fatalf("%q: %v formats as %q, parses back as %v, %v", s, phases, FormatSchedule(phases), back, err)
		}
	})
}
