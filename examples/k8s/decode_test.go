package k8s

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// kinds maps "apiVersion/kind" to a new object of its k8s.io/api type. A
// manifest of any other kind (or apiVersion) is refused: add its type here
// when a manifest needs one.
var kinds = map[string]func() any{
	"v1/Namespace":                       func() any { return new(corev1.Namespace) },
	"v1/Secret":                          func() any { return new(corev1.Secret) },
	"v1/ConfigMap":                       func() any { return new(corev1.ConfigMap) },
	"v1/Service":                         func() any { return new(corev1.Service) },
	"v1/PersistentVolumeClaim":           func() any { return new(corev1.PersistentVolumeClaim) },
	"batch/v1/Job":                       func() any { return new(batchv1.Job) },
	"apps/v1/StatefulSet":                func() any { return new(appsv1.StatefulSet) },
	"networking.k8s.io/v1/NetworkPolicy": func() any { return new(networkingv1.NetworkPolicy) },
}

// decodeStrict decodes one YAML document into its k8s.io/api type, chosen
// by its apiVersion and kind, as strictly as the API server's strict field
// validation: a duplicate key, a field the type does not have, or a field
// whose name differs only in case (encoding/json would accept
// "CompletionMode" for "completionMode"; sigs.k8s.io/json, which the API
// server uses, does not) is an error. It returns nil, nil for a document
// that holds only comments.
func decodeStrict(doc []byte) (any, error) {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, fmt.Errorf("YAML: %w", err)
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, nil
	}
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	// Only the two fields: the strict decode below checks the rest.
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &tm); err != nil {
		return nil, fmt.Errorf("reading apiVersion and kind: %w", err)
	}
	newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		known := make([]string, 0, len(kinds))
		for k := range kinds {
			known = append(known, k)
		}
		sort.Strings(known)
		return nil, fmt.Errorf("apiVersion %q kind %q is not a known type (known: %s)", tm.APIVersion, tm.Kind, strings.Join(known, ", "))
	}
	obj := newObj()
	strict, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("%s: %w", tm.Kind, errors.Join(strict...))
	}
	return obj, nil
}

// docSep is a YAML document separator line.
var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// manifest is one decoded document of a file under examples/k8s.
type manifest struct {
	file string // relative to examples/k8s
	doc  int    // from 1
	obj  any
}

func (m manifest) String() string { return fmt.Sprintf("%s (document %d)", m.file, m.doc) }

// loadManifests decodes every YAML document of every .yaml file in fsys
// (examples/k8s: os.DirFS(".")).
func loadManifests(fsys fs.FS) ([]manifest, error) {
	var out []manifest
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		rel := path
		for i, doc := range docSep.Split(string(b), -1) {
			obj, err := decodeStrict([]byte(doc))
			if err != nil {
				return fmt.Errorf("%s (document %d): %w", rel, i+1, err)
			}
			if obj != nil {
				out = append(out, manifest{file: rel, doc: i + 1, obj: obj})
			}
		}
		return nil
	})
	return out, err
}

// TestManifestsDecodeStrictly decodes every document under examples/k8s
// into its Kubernetes API type, refusing unknown, misspelt and duplicate
// fields, and checks that each party's directory has what a deployment
// needs.
func TestManifestsDecodeStrictly(t *testing.T) {
	ms, err := loadManifests(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, m := range ms {
		dir, _, _ := strings.Cut(m.file, "/")
		count[dir+" "+fmt.Sprintf("%T", m.obj)]++
	}
	want := []string{
		"modelowner *v1.Namespace", "modelowner *v1.Secret", "modelowner *v1.ConfigMap", "modelowner *v1.Job",
		"modelowner *v1.PersistentVolumeClaim", "modelowner *v1.Service",
		"dataowner *v1.Namespace", "dataowner *v1.Secret", "dataowner *v1.ConfigMap", "dataowner *v1.Job",
		"dataowner *v1.PersistentVolumeClaim", "dataowner *v1.Service",
		"dealer *v1.Namespace", "dealer *v1.Secret", "dealer *v1.ConfigMap", "dealer *v1.StatefulSet", "dealer *v1.Service",
	}
	for _, w := range want {
		if count[w] == 0 {
			t.Errorf("no %s manifest (found: %v)", w, count)
		}
	}
	t.Logf("%d documents decoded: %v", len(ms), count)
}

// TestDecodeStrictRefuses: the decoder refuses what the API server's strict
// field validation refuses (a misspelt or wrongly cased field, a duplicate
// key, a value of the wrong type) and kinds it has no type for, and accepts
// the valid document they are made from.
func TestDecodeStrictRefuses(t *testing.T) {
	const job = `apiVersion: batch/v1
kind: Job
metadata:
  name: w
spec:
  completionMode: Indexed
  completions: 2
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: c
          image: i
`
	if obj, err := decodeStrict([]byte(job)); err != nil {
		t.Fatalf("the valid Job is refused: %v", err)
	} else if j, ok := obj.(*batchv1.Job); !ok || j.Spec.CompletionMode == nil || *j.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Fatalf("the valid Job decodes to %#v", obj)
	}
	if obj, err := decodeStrict([]byte("# only a comment\n")); obj != nil || err != nil {
		t.Fatalf("a comment-only document: %v, %v", obj, err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"misspelt field", "completionMode:", "completionsMode:", `unknown field "spec.completionsMode"`},
		{"wrongly cased field", "completionMode:", "CompletionMode:", "CompletionMode"},
		{"unknown nested field", "restartPolicy:", "restartPolicyy:", "restartPolicyy"},
		{"duplicate key", "completions: 2", "completions: 2\n  completions: 3", "completions"},
		{"wrong type", "completions: 2", "completions: two", "completions"},
		{"unknown kind", "kind: Job", "kind: CronJobb", "not a known type"},
		{"unknown apiVersion", "batch/v1", "batch/v2", "not a known type"},
		{"not YAML", "name: w", "name: [w", "YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(job, tc.old, tc.new, 1)
			if doc == job {
				t.Fatalf("%q is not in the document", tc.old)
			}
			_, err := decodeStrict([]byte(doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
