// Package pool reads and writes the data owner's pool files: the unlabeled
// candidates a selection runs over, either images (grey-scale or colour) or
// texts. Read detects the format; Pool.Input turns the candidates into the
// model input of a checkpoint (pixels normalised as the Hugging Face ViT
// processor does, or texts WordPiece-tokenized with the checkpoint's
// vocab.txt or tokenizer.json), in file order: candidate i of the selection
// is the file's item i.
//
// The builders make a pool from a data owner's own files, with a Source per
// candidate that says where it came from (WriteIndex keeps them beside the
// pool, since a selection's result is pool indices): BuildImages from a
// directory of PNG and JPEG files, ReadTextsCSV from a column of a CSV or
// TSV file, ReadTextLines from a file of one text per line. The command
// examples/mkpool runs them.
//
//	p, err := pool.ReadFile("pool.jsonl.gz")
//	vocab, err := wordpiece.LoadVocab("checkpoint/vocab.txt")
//	in, err := p.Input(emb.Config, wordpiece.NewTokenizer(vocab, true), 0)
//	do := &selection.DataOwner{Params: params, Pool: in, Embedding: emb}
//
// The same package reads the model owner's label file (ReadLabels), which
// names one class per pool candidate.
//
// # Compression
//
// Either format may be stored as is or gzip-compressed (RFC 1952); Read and
// the Decode functions recognise gzip by its first two bytes 0x1f 0x8b. The
// Encode functions always write gzip with best compression and a header with
// no name and no time stamp, so equal sets give equal files.
//
// # Images ("SFIMGS01", "SFIMGS02")
//
// All integers little-endian. After decompression, byte by byte, grey-scale
// images:
//
//	offset  size        field
//	0       8           magic, the ASCII bytes "SFIMGS01"
//	8       4           N, the number of images (uint32)
//	12      2           W, the width in pixels (uint16, 1..4096)
//	14      2           H, the height in pixels (uint16, 1..4096)
//	16      N           one label byte per image (0..255); a pool writes 0s,
//	                    and readers of a pool ignore them
//	16+N    N·W·H       the pixels: image after image, each row-major (row 0
//	                    first, left to right), one byte per pixel, value
//	                    byte/255 in [0, 1] (0 black, 255 white)
//
// Images of C channels (C = 3 for RGB) start "SFIMGS02" and add C after H:
//
//	offset  size        field
//	0       8           magic, the ASCII bytes "SFIMGS02"
//	8       4           N (uint32)
//	12      2           W (uint16, 1..4096)
//	14      2           H (uint16, 1..4096)
//	16      2           C, the channels (uint16, 1..4)
//	18      N           one label byte per image, as above
//	18+N    N·C·W·H     the pixels: image after image, each channel after
//	                    channel (red, green, blue), each channel row-major
//
// Nothing may follow the last pixel. N·(1+C·W·H) may not exceed
// MaxImageBytes. A grey image goes into a checkpoint of any number of
// channels (repeated over them); an image of C > 1 channels only into one of
// C channels.
//
// # Texts ("selectformer-texts/1")
//
// UTF-8 JSON lines separated by "\n" (a "\r" before it and blank lines are
// ignored). Line 1 is the header, every other line one text:
//
//	{"format":"selectformer-texts/1"}
//	{"text":"Subject: cheap meds\n\nBuy now ..."}
//	{"text":"Subject: minutes of Monday's meeting ..."}
//
// The header's "format" is required and must be exactly
// "selectformer-texts/1". A labelled set adds "class_names" to the header
// (at most MaxClasses names) and a "label" to every line, an index into
// class_names:
//
//	{"format":"selectformer-texts/1","class_names":["ham","spam"]}
//	{"label":1,"text":"Subject: cheap meds ..."}
//
// Either every line has a label (and the header its class_names) or none
// does. Unknown keys and anything after the JSON value on a line are
// rejected. One line may hold at most MaxLineBytes bytes, the whole file
// MaxTextBytes. A pool needs no labels; a data owner's reader ignores them.
//
// # Labels (the model owner's -labels file)
//
// Plain text, one line per pool candidate, in pool order: the candidate's
// class as a number in [0, number of classes) or as one of the checkpoint's
// class names (config.json's id2label, e.g. "spam"). Blank lines and lines
// starting with "#" are skipped. See ParseLabels.
//
// # Limits
//
// The decoders read hostile input without trouble: every size field is
// checked against the limits below before anything is allocated from it,
// buffers grow only with the bytes actually present, and a gzip stream that
// inflates past the limit is cut off with an error.
package pool
