package pool

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// MaxLabelBytes bounds a label file.
const MaxLabelBytes = 64 << 20

// ParseLabels parses a label file (see the package comment): one class per
// line, as a number in [0, len(classes)) or as one of classes (a number
// wins over a class name that reads the same). Blank lines and lines
// starting with '#' are skipped.
func ParseLabels(b []byte, classes []string) ([]int, error) {
	if len(classes) == 0 {
		return nil, errors.New("parse labels: no classes")
	}
	if len(b) > MaxLabelBytes {
		return nil, fmt.Errorf("parse labels: %w (%d bytes)", ErrTooLarge, MaxLabelBytes)
	}
	byName := make(map[string]int, len(classes))
	for i := len(classes) - 1; i >= 0; i-- {
		byName[classes[i]] = i
	}
	var out []int
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(out) == MaxItems {
			return nil, fmt.Errorf("parse labels: line %d: more than %d labels", n+1, MaxItems)
		}
		v, err := strconv.Atoi(line)
		if err == nil && strconv.Itoa(v) == line {
			if v < 0 || v >= len(classes) {
				return nil, fmt.Errorf("parse labels: line %d: class %d outside [0, %d)", n+1, v, len(classes))
			}
			out = append(out, v)
			continue
		}
		v, ok := byName[line]
		if !ok {
			return nil, fmt.Errorf("parse labels: line %d: %q is neither a class number in [0, %d) nor a class name (%s)",
				n+1, line, len(classes), classList(classes))
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("parse labels: no labels")
	}
	return out, nil
}

// classList quotes the first class names for an error message.
func classList(classes []string) string {
	const show = 8
	q := make([]string, 0, show+1)
	for i, c := range classes {
		if i == show {
			q = append(q, fmt.Sprintf("… %d more", len(classes)-show))
			break
		}
		q = append(q, strconv.Quote(c))
	}
	return strings.Join(q, ", ")
}

// ReadLabels reads the label file at path (see ParseLabels).
func ReadLabels(path string, classes []string) ([]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read labels: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxLabelBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read labels %s: %w", path, err)
	}
	l, err := ParseLabels(b, classes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}
