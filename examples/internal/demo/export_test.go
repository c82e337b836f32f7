package demo

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/selection/pool"
)

// TestExportSources: what an export writes for the data owner reads back
// through selection/pool's builders (what mkpool runs) as the demo's pool,
// in pool order: the images' pixels exactly, the texts as they are; the
// answers file has each pool index's class on its line.
func TestExportSources(t *testing.T) {
	_, _, imgs, err := Splits(Config{Pool: 12})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Written over a larger earlier export: its extra images go.
	_, _, more, err := Splits(Config{Pool: 20})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*dataset.ImageSet{more, imgs} {
		if err := WriteImageDir(dir+"/images", s); err != nil {
			t.Fatal(err)
		}
	}
	files, skipped, err := pool.ImageFiles(dir + "/images")
	if err != nil || len(skipped) != 0 {
		t.Fatal(files, skipped, err)
	}
	got, _, err := pool.BuildImages(dir+"/images", files, pool.ImageOptions{Width: imgs.Width, Height: imgs.Height, Channels: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != imgs.Len() || files[0] != "00.png" || files[11] != "11.png" {
		t.Fatalf("%d images from %q, want %d named 00.png to 11.png", got.Len(), files, imgs.Len())
	}
	for i := range imgs.Images {
		if !slices.Equal(got.Pixels[i], imgs.Images[i]) {
			t.Fatalf("image %d differs from the pool's", i)
		}
	}

	texts := &dataset.TextSet{Texts: []string{"plain", "a, comma", "a \"quote\"\nand a line"}, Labels: []int{1, 0, 1}, ClassNames: []string{"ham", "spam"}}
	if err := WriteTextsCSV(dir+"/texts.csv", texts.Texts); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(dir + "/texts.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	back, _, err := pool.ReadTextsCSV(fh, "texts.csv", pool.TextOptions{Column: "text"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Texts, texts.Texts) {
		t.Fatalf("texts read back %q, want %q", back.Texts, texts.Texts)
	}

	script, answers, err := WriteLabeller(dir, className(texts))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(answers)
	if err != nil || string(b) != "spam\nham\nspam\n" {
		t.Fatalf("answers %q (%v)", b, err)
	}
	if b, err := os.ReadFile(script); err != nil || !strings.Contains(string(b), "answers.txt") {
		t.Fatalf("labeller %q (%v)", b, err)
	}
	if _, _, err := WriteLabeller(dir, []string{"two\nlines"}); err == nil {
		t.Fatal("an answer of two lines accepted")
	}
}
