package k8s

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDockerfile checks the image recipe against what the manifests run:
// every binary a container runs is built (statically, -trimpath) and
// copied to the path its command names; the image the binaries run in is
// scratch, as a non-root numeric user; the Go version is go.mod's.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// Join continued lines, drop comments.
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(string(b), "\\\n", " "), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "FROM ") {
			last = i
		}
	}
	if last < 0 || lines[last] != "FROM scratch" {
		t.Fatalf("the final stage is not FROM scratch")
	}
	final := strings.Join(lines[last:], "\n")
	user := regexp.MustCompile(`(?m)^USER (\d+)(:\d+)?$`).FindStringSubmatch(final)
	if user == nil {
		t.Errorf("the final stage has no numeric USER:\n%s", final)
	} else if uid, _ := strconv.Atoi(user[1]); uid == 0 {
		t.Errorf("the final stage runs as root (USER %s)", user[1])
	}
	if !strings.Contains(final, "COPY --from=build /out/ /usr/local/bin/") {
		t.Errorf("the final stage does not copy the binaries to /usr/local/bin/:\n%s", final)
	}
	var build string
	for _, l := range lines[:last] {
		if strings.HasPrefix(l, "RUN ") && strings.Contains(l, "go build") {
			build = l
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-o /out/"} {
		if !strings.Contains(build, want) {
			t.Errorf("the go build line lacks %s: %q", want, build)
		}
	}
	c := loadCluster(tChecker{t}, os.DirFS("."))
	for _, w := range c.workloads {
		if w.c.Command[0] != "/usr/local/bin/"+w.bin || !strings.Contains(build+" ", "./examples/"+w.bin+" ") {
			t.Errorf("%s runs %s: the image does not build it there (%q)", w, w.c.Command[0], build)
		}
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVer := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if goVer == nil {
		t.Fatal("go.mod has no go line")
	}
	if !strings.Contains(string(b), "ARG GO_VERSION="+string(goVer[1])+"\n") {
		t.Errorf("ARG GO_VERSION is not go.mod's go %s", goVer[1])
	}
}
