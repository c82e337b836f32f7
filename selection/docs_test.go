package selection

import (
	"os"
	"strings"
	"testing"
)

// TestDocsShowExample: the README's library snippet and the package
// comment's are exactly the body of the executed Example (so the code a
// newcomer copies is the code go test runs).
func TestDocsShowExample(t *testing.T) {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	src := read("example_test.go")
	start := strings.Index(src, "func Example() {\n")
	end := strings.Index(src, "\t// Output:")
	if start < 0 || end < start {
		t.Fatal("example_test.go: no Example with an Output")
	}
	var body, comment []string
	for _, l := range strings.Split(strings.TrimRight(src[start+len("func Example() {\n"):end], "\n"), "\n") {
		l = strings.TrimPrefix(l, "\t")
		body = append(body, l)
		if l == "" {
			comment = append(comment, "//")
		} else {
			comment = append(comment, "//\t"+l)
		}
	}
	if readme := read("../README.md"); !strings.Contains(readme, "```go\n"+strings.Join(body, "\n")+"\n```") {
		t.Error("README.md does not show the body of selection's Example verbatim")
	}
	if doc := read("doc.go"); !strings.Contains(doc, strings.Join(comment, "\n")+"\n") {
		t.Error("doc.go does not show the body of Example verbatim")
	}
}
