package transport

import (
	"encoding/binary"
	"unsafe"
)

// hostLittleEndian reports whether uint64 memory is laid out little-endian,
// in which case word slices go to the wire without encoding.
var hostLittleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// wordsView reinterprets the memory of w as bytes (valid on any host; the
// byte order is the host's).
func wordsView(w []uint64) []byte {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
}

// wordsToWire returns the little-endian wire form of w, sharing w's memory
// on little-endian hosts.
func wordsToWire(w []uint64) []byte {
	if hostLittleEndian {
		return wordsView(w)
	}
	return encodeWordsLE(w)
}

// encodeWordsLE is the portable encoder.
func encodeWordsLE(w []uint64) []byte {
	b := make([]byte, 8*len(w))
	for i, x := range w {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return b
}

// decodeWordsLE is the portable decoder; len(b) must be 8*len(dst).
func decodeWordsLE(dst []uint64, b []byte) {
	for i := range dst {
		dst[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
}
