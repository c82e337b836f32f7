package layering

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The amd64 assembly's vector encodings. An instruction in the legacy SSE
// encoding (PINSRQ, MOVQ r, X, MOVOU, AESENC: no V prefix) that runs while
// the upper halves of the vector registers are dirty (after a YMM or ZMM
// write, before VZEROUPPER) pays a state transition: on the Intel Xeon
// (Emerald Rapids) of issue 38's sixteenth and seventeenth sessions,
// ctrVAES's one PINSRQ after its round keys' broadcasts cost about 200 ns a
// call, more than the 2 KiB of key stream it then made (the seeded halves'
// regeneration, 16% of a dealer-free data owner's CPU there). So a function
// that touches a YMM or ZMM register uses only VEX or EVEX encodings on XMM
// registers (VMOVQ, VPINSRQ, ...), anywhere in its body (a loop may reach a
// prologue's instruction again), and ends every path with VZEROUPPER so
// that the SSE code after it (Go's own, crypto/aes) starts clean.

var (
	wideReg  = regexp.MustCompile(`\b[YZ]([0-9]|[12][0-9]|3[01])\b`)
	xmmReg   = regexp.MustCompile(`\bX([0-9]|1[0-5])\b`)
	mnemonic = regexp.MustCompile(`^\s*([A-Z][A-Z0-9]*)\b`)
	// invocation is a line's first word, a macro's name in any case
	// (ctrRound8(Z9)).
	invocation = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\b`)
)

// asmFunc is one TEXT symbol's body, its lines with macros expanded.
type asmFunc struct {
	name  string
	lines []asmLine
}

type asmLine struct {
	no   int
	text string
}

// parseAsm splits Go assembly src into functions, expanding the macros it
// #defines (their bodies' instructions, separated by ';', follow the
// invoking line; arguments are kept on that line, so a register passed to
// a macro is seen there).
func parseAsm(src string) []asmFunc {
	macros := map[string]*[]string{}
	var fns []asmFunc
	var def *[]string
	sc := bufio.NewScanner(strings.NewReader(src))
	for no := 1; sc.Scan(); no++ {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		if def != nil {
			cont := strings.HasSuffix(strings.TrimSpace(line), `\`)
			*def = append(*def, strings.Split(strings.TrimSuffix(strings.TrimSpace(line), `\`), ";")...)
			if !cont {
				def = nil
			}
			continue
		}
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "#define "); ok {
			name, text := macroHead(rest)
			body := new([]string)
			macros[name] = body
			cont := strings.HasSuffix(text, `\`)
			if text = strings.TrimSpace(strings.TrimSuffix(text, `\`)); text != "" {
				*body = strings.Split(text, ";") // a body on the #define line itself
			}
			if cont {
				def = body
			}
			continue
		}
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "TEXT "); ok {
			fns = append(fns, asmFunc{name: strings.Fields(rest)[0]})
			continue
		}
		if len(fns) == 0 || strings.TrimSpace(line) == "" {
			continue
		}
		f := &fns[len(fns)-1]
		f.lines = append(f.lines, asmLine{no, line})
		if m := invocation.FindStringSubmatch(line); m != nil && macros[m[1]] != nil {
			for _, b := range *macros[m[1]] {
				f.lines = append(f.lines, asmLine{no, b})
			}
		}
	}
	return fns
}

// macroHead splits what follows "#define " into the macro's name and the
// rest of the line after its name and parameter list.
func macroHead(rest string) (name, text string) {
	rest = strings.TrimSpace(rest)
	i := strings.IndexAny(rest, " \t(")
	if i < 0 {
		return rest, ""
	}
	name, text = rest[:i], rest[i:]
	if strings.HasPrefix(text, "(") {
		if j := strings.Index(text, ")"); j >= 0 {
			text = text[j+1:]
		}
	}
	return name, strings.TrimSpace(text)
}

// legacySSE returns the lines of f that run a legacy-encoded instruction on
// an XMM register while f also touches YMM or ZMM registers, and the RETs
// not preceded by VZEROUPPER in such a function.
func legacySSE(f asmFunc) []string {
	wide := false
	for _, l := range f.lines {
		if wideReg.MatchString(l.text) {
			wide = true
		}
	}
	if !wide {
		return nil
	}
	var bad []string
	prev := ""
	for _, l := range f.lines {
		m := mnemonic.FindStringSubmatch(l.text)
		if m == nil {
			continue // a label
		}
		op := m[1]
		switch {
		case op == "RET" && prev != "VZEROUPPER":
			bad = append(bad, fmt.Sprintf("line %d: RET without VZEROUPPER before it", l.no))
		case !strings.HasPrefix(op, "V") && xmmReg.MatchString(l.text):
			bad = append(bad, fmt.Sprintf("line %d: %s", l.no, strings.TrimSpace(l.text)))
		}
		prev = op
	}
	return bad
}

// TestAsmVectorEncodings: no amd64 assembly function of the module that
// touches a YMM or ZMM register runs a legacy SSE instruction, or returns
// without VZEROUPPER.
func TestAsmVectorEncodings(t *testing.T) {
	root := filepath.Join("..", "..")
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_amd64.s") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, f := range parseAsm(string(src)) {
			for _, b := range legacySSE(f) {
				t.Errorf("%s: %s: %s", path, f.name, b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 5 {
		t.Fatalf("found %d amd64 assembly files, want the module's (at least 5)", files)
	}
}

// TestAsmVectorEncodingsCatch: the check flags what it must (ctrVAES's
// PINSRQ as it was, an SSE instruction inside a macro (continued over
// lines or on the #define line, named in either case), a missing
// VZEROUPPER) and passes clean code and pure SSE functions.
func TestAsmVectorEncodingsCatch(t *testing.T) {
	const src = `
#define ROUND(r) \
	VAESENC r, Z0, Z0; \
	PXOR X1, X2
#define oneLine(k) VAESENC k, Z0, Z0; MOVOU X3, X4

TEXT ·pinsr(SB), NOSPLIT, $0-8
	VBROADCASTI32X4 0(AX), Z8
	MOVQ BX, X0
	PINSRQ $1, DX, X0
	VZEROUPPER
	RET

TEXT ·macro(SB), NOSPLIT, $0-8
	ROUND(Z9)
	VZEROUPPER
	RET

TEXT ·oneLineMacro(SB), NOSPLIT, $0-8
	oneLine(Z9)
	VZEROUPPER
	RET

TEXT ·noZeroUpper(SB), NOSPLIT, $0-8
	VPXORQ Z1, Z1, Z1
	RET

TEXT ·clean(SB), NOSPLIT, $0-8
	VMOVQ BX, X0
	VPINSRQ $1, DX, X0, X0
	VSHUFI64X2 $0, Z0, Z0, Z23
loop:
	VMOVDQU64 Z23, 0(DI)
	JMP loop
	VZEROUPPER
	RET

TEXT ·sse(SB), NOSPLIT, $0-8
	MOVOU 0(SI), X0
	AESENC X8, X0
	RET
`
	want := map[string]int{"·pinsr(SB),": 2, "·macro(SB),": 1, "·oneLineMacro(SB),": 1, "·noZeroUpper(SB),": 1, "·clean(SB),": 0, "·sse(SB),": 0}
	fns := parseAsm(src)
	if len(fns) != len(want) {
		t.Fatalf("parsed %d functions, want %d", len(fns), len(want))
	}
	for _, f := range fns {
		if got := len(legacySSE(f)); got != want[f.name] {
			t.Errorf("%s: %d findings %v, want %d", f.name, got, legacySSE(f), want[f.name])
		}
	}
}
