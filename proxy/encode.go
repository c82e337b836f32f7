package proxy

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/selectformer/selectformer/nn/safetensors"
)

// encodeMagic starts a proxy encoded by Marshal.
const encodeMagic = "SFPX"

// MaxManifestBytes bounds the manifest (proxy.json) of a proxy read by
// Unmarshal: an honest one is a few kilobytes.
const MaxManifestBytes = 1 << 20

// Marshal returns p as one message: "SFPX" | the manifest's length (u32,
// little-endian) | the manifest (the proxy.json that Save writes, without
// ex vivo ranges) | the weights (the model.safetensors that Save writes).
// It carries a proxy between the model owner's own machines (a sharded
// selection's coordinator hands each phase's proxy to its workers);
// Unmarshal reads it back, bit-identical.
func (p *Proxy) Marshal() ([]byte, error) {
	man, err := p.manifest(nil)
	if err != nil {
		return nil, fmt.Errorf("marshal proxy: %w", err)
	}
	mb, err := json.Marshal(man)
	if err != nil {
		return nil, fmt.Errorf("marshal proxy: %w", err)
	}
	if len(mb) > MaxManifestBytes {
		return nil, fmt.Errorf("marshal proxy: manifest of %d bytes (at most %d)", len(mb), MaxManifestBytes)
	}
	var ts []safetensors.Tensor
	for _, q := range p.Params() {
		t, err := safetensors.FromFloat64s(q.Name, safetensors.F64, q.Value.Shape, q.Value.Data)
		if err != nil {
			return nil, fmt.Errorf("marshal proxy: %w", err)
		}
		ts = append(ts, t)
	}
	var buf bytes.Buffer
	buf.WriteString(encodeMagic)
	buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(mb))))
	buf.Write(mb)
	if err := safetensors.Write(&buf, ts, map[string]string{"format": "pt", "selectformer": Format}); err != nil {
		return nil, fmt.Errorf("marshal proxy: %w", err)
	}
	return buf.Bytes(), nil
}

// Unmarshal decodes a proxy written by Marshal. It checks the sizes before
// it decodes anything (the manifest at most MaxManifestBytes, within b),
// decodes the manifest strictly (DecodeManifest), parses the weights with
// the bounds of safetensors.Parse and requires every parameter of the
// manifest's proxy, of its shape, and no other tensor.
func Unmarshal(b []byte) (*Proxy, error) {
	if len(b) < len(encodeMagic)+4 || string(b[:len(encodeMagic)]) != encodeMagic {
		return nil, fmt.Errorf("unmarshal proxy: not a proxy message")
	}
	n := uint64(binary.LittleEndian.Uint32(b[len(encodeMagic):]))
	rest := b[len(encodeMagic)+4:]
	if n > MaxManifestBytes || n > uint64(len(rest)) {
		return nil, fmt.Errorf("unmarshal proxy: manifest of %d bytes in a message of %d (at most %d)", n, len(b), MaxManifestBytes)
	}
	man, cfg, err := DecodeManifest(rest[:n])
	if err != nil {
		return nil, fmt.Errorf("unmarshal proxy: %w", err)
	}
	f, err := safetensors.Parse(rest[n:])
	if err != nil {
		return nil, fmt.Errorf("unmarshal proxy: %w", err)
	}
	p, err := fromManifest(man, cfg)
	if err != nil {
		return nil, fmt.Errorf("unmarshal proxy: %w", err)
	}
	if err := loadParams(p.Params(), f); err != nil {
		return nil, fmt.Errorf("unmarshal proxy: %w", err)
	}
	return p, nil
}
