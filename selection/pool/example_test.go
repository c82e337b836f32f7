package pool_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/wordpiece"
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

// A pool built from a directory of PNG files (two 2×2 photos here), in the
// byte-wise order of their paths, with the index that maps each pool index
// back to its file.
func ExampleBuildImages() {
	dir, err := os.MkdirTemp("", "photos")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for name, c := range map[string]color.Color{"cat.png": color.White, "ant.png": color.RGBA{255, 0, 0, 255}} {
		img := image.NewRGBA(image.Rect(0, 0, 2, 2))
		for i := range 4 {
			img.Set(i%2, i/2, c)
		}
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			log.Fatal(err)
		}
		if err := png.Encode(f, img); err != nil {
			log.Fatal(err)
		}
		f.Close()
	}
	files, _, err := pool.ImageFiles(dir)
	if err != nil {
		log.Fatal(err)
	}
	// Grey, for a one-channel ViT of image_size 2 (Channels: 3 keeps colour).
	images, sources, err := pool.BuildImages(dir, files, pool.ImageOptions{Width: 2, Height: 2, Channels: 1})
	if err != nil {
		log.Fatal(err)
	}
	var file bytes.Buffer
	if err := pool.EncodeImages(&file, images); err != nil {
		log.Fatal(err)
	}
	p, err := pool.Read(&file)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Kind(), p.Len(), p.Images.Width, p.Images.Height)
	fmt.Printf("%.3f\n", p.Images.Pixels[0])
	if err := pool.WriteIndex(os.Stdout, sources); err != nil {
		log.Fatal(err)
	}
	// Output:
	// images 2 2 2
	// [0.298 0.298 0.298 0.298]
	// index,file,record,line
	// 0,ant.png,,
	// 1,cat.png,,
}

// A text pool built from one column of a CSV file whose texts span lines.
func ExampleReadTextsCSV() {
	csvFile := `id,text,date
1,"Subject: cheap meds

Buy now, pay later",2024-01-02
2,Minutes of Monday's meeting,2024-01-03
`
	texts, sources, err := pool.ReadTextsCSV(strings.NewReader(csvFile), "mails.csv", pool.TextOptions{Column: "text"})
	if err != nil {
		log.Fatal(err)
	}
	var file bytes.Buffer
	if err := pool.EncodeTexts(&file, texts); err != nil {
		log.Fatal(err)
	}
	p, err := pool.Read(&file)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %d %q\n", p.Kind(), p.Len(), p.Texts.Texts[0])
	if err := pool.WriteIndex(os.Stdout, sources); err != nil {
		log.Fatal(err)
	}
	// Output:
	// texts 2 "Subject: cheap meds\n\nBuy now, pay later"
	// index,file,record,line
	// 0,mails.csv,1,2
	// 1,mails.csv,2,5
}

// A text pool from a file of one text per line; blank lines are left out.
func ExampleReadTextLines() {
	texts, sources, err := pool.ReadTextLines(strings.NewReader("first review\n\nsecond review\n"), "reviews.txt")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q %+v\n", texts.Texts, sources)
	// Output:
	// ["first review" "second review"] [{File:reviews.txt Record:0 Line:1} {File:reviews.txt Record:0 Line:3}]
}
