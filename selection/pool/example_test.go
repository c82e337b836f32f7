package pool_test

import (
	"bytes"
	"fmt"
	"log"
	"strings"

	"github.com/selectformer/selectformer/proxy/model"
	"github.com/selectformer/selectformer/proxy/wordpiece"
	"github.com/selectformer/selectformer/selection/pool"
)

// A text pool as a data owner would write it by hand (plain JSON lines), read
// and tokenized for a BERT checkpoint with its vocab.txt.
func ExampleRead() {
	file := `{"format":"selectformer-texts/1"}
{"text":"Cheap meds, buy now!"}
{"text":"Minutes of the meeting"}
`
	p, err := pool.Read(strings.NewReader(file))
	if err != nil {
		log.Fatal(err)
	}
	vocab, err := wordpiece.ReadVocab(strings.NewReader("[PAD]\n[UNK]\n[CLS]\n[SEP]\ncheap\nmeds\nbuy\nnow\nmeeting\n,\n!\n[MASK]\n"))
	if err != nil {
		log.Fatal(err)
	}
	cfg := model.Config{Family: model.BERT, VocabSize: vocab.Size(), MaxPositions: 512}
	in, err := p.Input(cfg, wordpiece.NewTokenizer(vocab, true), 8)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Kind(), p.Len())
	for i := range in.Len() {
		fmt.Println(in.IDs[i], in.Mask[i])
	}
	// Output:
	// texts 2
	// [2 4 5 9 6 7 10 3] [1 1 1 1 1 1 1 1]
	// [2 1 1 1 8 3 0 0] [1 1 1 1 1 1 0 0]
}

// An image pool: written with EncodeImages (gzip'd "SFIMGS01"), read back
// and normalised for a ViT with 2×2 images.
func ExampleEncodeImages() {
	var buf bytes.Buffer
	err := pool.EncodeImages(&buf, &pool.Images{Width: 2, Height: 2, Pixels: [][]float64{{0, 0.5, 1, 1}}})
	if err != nil {
		log.Fatal(err)
	}
	p, err := pool.Read(&buf)
	if err != nil {
		log.Fatal(err)
	}
	in, err := p.Input(model.Config{Family: model.ViT, ImageSize: 2, NumChannels: 1}, nil, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Kind(), p.Len(), p.Images.Width, p.Images.Height)
	fmt.Printf("%.3f\n", in.Pixels[0])
	// Output:
	// images 1 2 2
	// [-1.000 0.004 1.000 1.000]
}
