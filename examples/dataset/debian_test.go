package dataset

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gcideSample is dictd text in GCIDE's layout: a database header entry, a
// Webster entry with a pronunciation, character codes, a cross-reference in
// braces and source tags, and an entry taken from WordNet.
const gcideSample = `00-database-info
     This file was converted from the original database on:
          2002-07-13

Abdomen \Ab*do"men\, n. [L. abdomen (a word of uncertain
   etymol.): cf. F. abdomen.]
   1. (Anat.) The belly, or that part of the body between the
      thorax and the pelvis.
      [1913 Webster]

   2. (Zool.) The posterior section of the body, in insects. See {Thorax}.
      [1913 Webster]

24th \24th\ adj.
   1. coming next after the twenty-third in a series

   Syn: twenty-fourth
        [WordNet 1.5 +PJC]

Streen (str[=e]n), n. See Strene. [Obs.] --Chaucer.
   [1913 Webster]
`

// TestLoadGCIDE reads a dictd file (plain and gzip'd, as dictzip is):
// paragraphs in order, markup removed, the header and the WordNet entry
// left out.
func TestLoadGCIDE(t *testing.T) {
	want := []string{
		"Abdomen , n. [L. abdomen (a word of uncertain etymol.): cf. F. abdomen.] 1. (Anat.) The belly, or that part of the body between the thorax and the pelvis.",
		"2. (Zool.) The posterior section of the body, in insects. See Thorax.",
		"Streen (stren), n. See Strene. [Obs.] --Chaucer.",
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "gcide.dict")
	if err := os.WriteFile(plain, []byte(gcideSample), 0o644); err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(gcideSample))
	zw.Close()
	dz := filepath.Join(dir, "gcide.dict.dz")
	if err := os.WriteFile(dz, z.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{plain, dz} {
		got, err := LoadGCIDE(p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: paragraphs\n%q\nwant\n%q", p, got, want)
		}
	}
	if _, err := LoadGCIDE(filepath.Join(dir, "missing.dz")); err == nil || !strings.Contains(err.Error(), "dict-gcide") {
		t.Fatalf("a missing file: %v (want the package named)", err)
	}
	if _, err := LoadGCIDE(plain + ".gz"); err == nil {
		t.Fatal("a missing .gz file was read")
	}
	bad := filepath.Join(dir, "bad.dz")
	os.WriteFile(bad, []byte(gcideSample), 0o644)
	if _, err := LoadGCIDE(bad); err == nil {
		t.Fatal("a .dz file that is not gzip was read")
	}
}

// wordNetSample is two synsets of WordNet 3.0's data.noun after its licence
// header.
const wordNetSample = `  1 This software and database is being provided to you, the LICENSEE, by
  2 Princeton University under the following license.
02084071 05 n 03 dog 0 domestic_dog 0 Canis_familiaris 0 023 @ 02083346 n 0000 | a member of the genus Canis (probably descended from the common wolf) that has been domesticated by man since prehistoric times; "the dog barked all night"  
00596193 04 n 01 praetorship 0 002 @ 00586262 n 0000 + 10463028 n 0101 | the office of praetor  
`

// TestLoadWordNetNouns reads synsets: offset, supersense, words (spaces
// for underscores), gloss; as a labelled text set and a subset; and
// refuses lines that do not parse, naming the line.
func TestLoadWordNetNouns(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data.noun"), []byte(wordNetSample), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := LoadWordNetNouns(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []NounSynset{
		{Offset: 2084071, Supersense: "noun.animal", Words: []string{"dog", "domestic dog", "Canis familiaris"},
			Gloss: `a member of the genus Canis (probably descended from the common wolf) that has been domesticated by man since prehistoric times; "the dog barked all night"`},
		{Offset: 596193, Supersense: "noun.act", Words: []string{"praetorship"}, Gloss: "the office of praetor"},
	}
	if len(got) != 2 || got[0].Offset != want[0].Offset || got[0].Supersense != want[0].Supersense || !slices.Equal(got[0].Words, want[0].Words) ||
		got[0].Gloss != want[0].Gloss || got[1].Supersense != "noun.act" || got[1].Gloss != want[1].Gloss {
		t.Fatalf("synsets\n%+v\nwant\n%+v", got, want)
	}
	if s := got[0].Text(); s != "dog, domestic dog, Canis familiaris: "+want[0].Gloss {
		t.Fatalf("text %q", s)
	}
	set := NounTextSet(got)
	if set.Len() != 2 || set.ClassNames[set.Labels[0]] != "noun.animal" || set.ClassNames[set.Labels[1]] != "noun.act" {
		t.Fatalf("text set %+v", set)
	}
	for _, bad := range []string{
		"02084071 05 n 03 dog 0 no gloss here",
		"02084071 99 n 01 dog 0 000 | a gloss",
		"02084071 05 v 01 run 0 000 | a verb",
		"x 05 n 01 dog 0 000 | a gloss",
		"02084071 05 n 09 dog 0 000 | too few words",
	} {
		os.WriteFile(filepath.Join(dir, "data.noun"), []byte(wordNetSample+bad+"\n"), 0o644)
		if _, err := LoadWordNetNouns(dir); err == nil || !strings.Contains(err.Error(), "line 5") {
			t.Errorf("%q: %v (want an error naming line 5)", bad, err)
		}
	}
	if _, err := LoadWordNetNouns(t.TempDir()); err == nil || !strings.Contains(err.Error(), "wordnet-base") {
		t.Errorf("a missing database: %v (want the package named)", err)
	}
}

// TestWordNetSubset checks the committed subset: 300 synsets of each of its
// ten supersenses, and that NounSubset draws it deterministically.
func TestWordNetSubset(t *testing.T) {
	s, err := WordNetSubset()
	if err != nil {
		t.Fatal(err)
	}
	counts, err := ClassCounts(s.Labels, Indices(s.Len()), len(s.ClassNames))
	if err != nil {
		t.Fatal(err)
	}
	for c, n := range counts {
		if want := map[bool]int{true: 300, false: 0}[slices.Contains(WordNetSubsetClasses, s.ClassNames[c])]; n != want {
			t.Errorf("%s: %d synsets, want %d", s.ClassNames[c], n, want)
		}
	}
	a, err := NounSubset(s, WordNetSubsetClasses[:3], 50, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NounSubset(s, WordNetSubsetClasses[:3], 50, 7)
	if a.Len() != 150 || !slices.Equal(a.Texts, b.Texts) {
		t.Fatalf("subset of %d, equal %v: want 150, deterministic", a.Len(), slices.Equal(a.Texts, b.Texts))
	}
	if _, err := NounSubset(s, []string{"noun.unicorn"}, 5, 1); err == nil {
		t.Fatal("an unknown class was drawn")
	}
	two, err := Supersenses(s, []string{"noun.food", "noun.animal"})
	if err != nil {
		t.Fatal(err)
	}
	if two.Len() != 600 || !slices.Equal(two.ClassNames, []string{"food", "animal"}) {
		t.Fatalf("%d texts of classes %v, want 600 of food, animal", two.Len(), two.ClassNames)
	}
	for i, l := range two.Labels {
		if j := slices.Index(s.Texts, two.Texts[i]); s.ClassNames[s.Labels[j]] != "noun."+two.ClassNames[l] {
			t.Fatalf("%q labelled %s, is %s", two.Texts[i], two.ClassNames[l], s.ClassNames[s.Labels[j]])
		}
	}
	for _, bad := range [][]string{{"noun.unicorn"}, {"noun.food", "noun.food"}} {
		if _, err := Supersenses(s, bad); err == nil {
			t.Errorf("classes %v accepted", bad)
		}
	}
}

func FuzzReadGCIDE(f *testing.F) {
	f.Add([]byte(gcideSample))
	f.Add([]byte("x\n  [WordNet]\n\ny \\a\\ {b} [=e]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		paras, err := readGCIDE(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, p := range paras {
			if p == "" || strings.Contains(p, "\n") || strings.ContainsAny(p, "{}") {
				t.Fatalf("paragraph %q: empty, several lines or braces", p)
			}
		}
	})
}

func FuzzParseNounSynset(f *testing.F) {
	for _, l := range strings.Split(wordNetSample, "\n")[2:4] {
		f.Add(l)
	}
	f.Add("1 05 n ff a 0 | g")
	f.Fuzz(func(t *testing.T, line string) {
		s, err := parseNounSynset(line)
		if err != nil {
			return
		}
		if len(s.Words) == 0 || !slices.Contains(NounSupersenses, s.Supersense) {
			t.Fatalf("%q: parsed %+v", line, s)
		}
		_ = s.Text()
	})
}
