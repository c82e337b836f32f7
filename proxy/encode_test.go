package proxy

import (
	"encoding/binary"
	"testing"
)

// FuzzUnmarshal: Unmarshal never panics and refuses what is not a proxy
// (sizes checked before decoding).
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte("SFPX\x00\x00\x00\x00"))
	f.Add(append([]byte("SFPX"), binary.LittleEndian.AppendUint32(nil, 0xffffffff)...))
	f.Add(append(append([]byte("SFPX"), binary.LittleEndian.AppendUint32(nil, 2)...), "{}"...))
	f.Add(append(append([]byte("SFPX"), binary.LittleEndian.AppendUint32(nil, 27)...), `{"format":"selectformer-pr"}`...))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Unmarshal(b)
		if err == nil && p == nil {
			t.Fatal("nil proxy without an error")
		}
	})
}

func TestUnmarshalRefusesOversizedManifest(t *testing.T) {
	b := append([]byte("SFPX"), binary.LittleEndian.AppendUint32(nil, MaxManifestBytes+1)...)
	b = append(b, make([]byte, MaxManifestBytes+1)...)
	if _, err := Unmarshal(b); err == nil {
		t.Fatal("accepted")
	}
	if _, err := Unmarshal([]byte("SFPQ0000")); err == nil {
		t.Fatal("accepted another magic")
	}
}
