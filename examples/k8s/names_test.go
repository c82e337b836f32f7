package k8s

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// nameProblems returns what the API server would refuse in m's names and
// labels: object names (a Service's an RFC 1035 label, a Namespace's an
// RFC 1123 label, the others RFC 1123 subdomains), an Indexed Job's and a
// StatefulSet's pod hostnames ($(name)-$(index), RFC 1123 labels of at
// most 63 characters), label keys and values, and container and port
// names.
func nameProblems(m manifest) []string {
	var out []string
	add := func(what string, errs []string) {
		for _, e := range errs {
			out = append(out, fmt.Sprintf("%s: %s", what, e))
		}
	}
	meta, ok := m.obj.(metav1.Object)
	if !ok {
		return []string{fmt.Sprintf("%T has no metadata", m.obj)}
	}
	name := meta.GetName()
	switch o := m.obj.(type) {
	case *corev1.Service:
		add("Service name "+name, validation.IsDNS1035Label(name))
		for _, p := range o.Spec.Ports {
			add("Service port name "+p.Name, validation.IsDNS1035Label(p.Name))
		}
	case *corev1.Namespace:
		add("Namespace name "+name, content.IsDNS1123Label(name))
	default:
		add(fmt.Sprintf("%T name %q", m.obj, name), content.IsDNS1123Subdomain(name))
	}
	labels := map[string]string{}
	for k, v := range meta.GetLabels() {
		labels[k] = v
	}
	var tmpl *corev1.PodTemplateSpec
	if j, ok := m.obj.(*batchv1.Job); ok {
		tmpl = &j.Spec.Template
		if j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion && j.Spec.Completions != nil {
			host := fmt.Sprintf("%s-%d", name, *j.Spec.Completions-1)
			add("pod hostname "+host, content.IsDNS1123Label(host))
		}
	}
	if st, ok := m.obj.(*appsv1.StatefulSet); ok {
		tmpl = &st.Spec.Template
		if st.Spec.Replicas != nil {
			host := fmt.Sprintf("%s-%d", name, *st.Spec.Replicas-1)
			add("pod hostname "+host, content.IsDNS1123Label(host))
		}
	}
	if tmpl != nil {
		for k, v := range tmpl.Labels {
			labels[k+"@template"] = v
		}
		for _, c := range tmpl.Spec.Containers {
			add("container name "+c.Name, content.IsDNS1123Label(c.Name))
			for _, p := range c.Ports {
				if len(p.Name) > 15 {
					out = append(out, "container port name "+p.Name+": longer than 15 characters")
				}
			}
		}
	}
	for k, v := range labels {
		k = strings.TrimSuffix(k, "@template")
		add("label key "+k, content.IsLabelKey(k))
		add("label value "+v, content.IsLabelValue(v))
	}
	return out
}

// TestManifestNames checks every object's names and labels as the API
// server would (nameProblems), and that the check refuses a bad name.
func TestManifestNames(t *testing.T) {
	ms, err := loadManifests(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		for _, p := range nameProblems(m) {
			t.Errorf("%s: %s", m, p)
		}
	}
	long := batchv1.IndexedCompletion
	k := int32(4)
	for _, tc := range []struct {
		obj  any
		want string
	}{
		{&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "7-workers"}}, "Service name 7-workers"},
		{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "Selectformer"}}, "Namespace name"},
		{&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("w", 62)}, Spec: batchv1.JobSpec{CompletionMode: &long, Completions: &k}}, "pod hostname"},
		{&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("d", 62)}, Spec: appsv1.StatefulSetSpec{Replicas: &k}}, "pod hostname " + strings.Repeat("d", 62) + "-3"},
		{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "peers", Labels: map[string]string{"app": "a b"}}}, "label value a b"},
	} {
		if ps := nameProblems(manifest{obj: tc.obj}); !strings.Contains(strings.Join(ps, "\n"), tc.want) {
			t.Errorf("%T: problems %q, want one naming %q", tc.obj, ps, tc.want)
		}
	}
}

// FuzzDecodeStrict: decodeStrict never panics, and what it accepts it
// accepts again after encoding it (the type holds every field it read).
func FuzzDecodeStrict(f *testing.F) {
	ms, err := loadManifests(os.DirFS("."))
	if err != nil {
		f.Fatal(err)
	}
	for _, m := range ms {
		b, err := json.Marshal(m.obj)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b) // JSON is YAML
	}
	f.Add([]byte("apiVersion: batch/v1\nkind: Job\nspec:\n  completionsMode: Indexed\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		obj, err := decodeStrict(doc)
		if err != nil || obj == nil {
			return
		}
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatalf("accepted %q, cannot encode it: %v", doc, err)
		}
		if _, err := decodeStrict(b); err != nil {
			t.Fatalf("accepted %q, refuses its encoding %s: %v", doc, b, err)
		}
	})
}
