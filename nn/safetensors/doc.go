// Package safetensors reads and writes the Hugging Face safetensors format.
//
// A safetensors file is an 8-byte little-endian header length N, followed by N
// bytes of JSON header, followed by the raw tensor bytes. The header maps each
// tensor name to its dtype, shape and [begin, end) byte offsets into the data
// buffer (relative to the end of the header); an optional "__metadata__" entry
// maps strings to strings. Tensor data are stored little-endian, row-major.
//
// Parse validates a file as strictly as the reference Rust implementation: the
// header length is bounded and must fit in the file, the JSON must be a
// well-formed object without duplicate names, dtypes must be known, dims
// non-negative, each tensor's byte length must equal its element count times
// its dtype size, and the tensors must tile the data buffer exactly (no
// overlaps, no gaps, no trailing bytes).
//
// Write produces files that the Hugging Face library accepts: the header is
// compact JSON with "__metadata__" first and then the tensors sorted by name,
// padded with spaces to a multiple of 8 bytes; tensor data follow in the same
// order.
package safetensors
