package strictjson

import (
	"errors"
	"testing"
)

type doc struct {
	A int    `json:"a"`
	B string `json:"b,omitempty"`
}

// TestUnmarshal: one value with known fields is decoded; unknown fields,
// trailing values, stray closing brackets and malformed input are errors.
func TestUnmarshal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		want     doc
		ok       bool
		trailing bool
	}{
		{"plain", `{"a":1,"b":"x"}`, doc{A: 1, B: "x"}, true, false},
		{"white space after", "{\"a\":2}\n \t", doc{A: 2}, true, false},
		{"unknown field", `{"a":1,"c":2}`, doc{}, false, false},
		{"second value", `{"a":1}{"a":2}`, doc{}, false, true},
		{"stray bracket", `{"a":1}]`, doc{}, false, true},
		{"stray brace", `{"a":1}}`, doc{}, false, true},
		{"garbage after", `{"a":1} x`, doc{}, false, true},
		{"truncated", `{"a":`, doc{}, false, false},
		{"empty", ``, doc{}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got doc
			err := Unmarshal([]byte(tc.in), &got)
			if (err == nil) != tc.ok {
				t.Fatalf("Unmarshal(%q) = %v, want ok=%v", tc.in, err, tc.ok)
			}
			if tc.ok && got != tc.want {
				t.Fatalf("Unmarshal(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			if tc.trailing != errors.Is(err, ErrTrailingData) {
				t.Fatalf("Unmarshal(%q) = %v, trailing=%v", tc.in, err, tc.trailing)
			}
		})
	}
}

// FuzzUnmarshal: never panics; whatever it accepts re-decodes alike.
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":"x"}`))
	f.Add([]byte(`{"a":1}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d doc
		if err := Unmarshal(b, &d); err != nil {
			return
		}
		var again doc
		if err := Unmarshal(b, &again); err != nil || again != d {
			t.Fatalf("accepted %q once, then %v", b, err)
		}
	})
}
