package k8s

import (
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// indexLabel and indexAnnotation are what Kubernetes puts on an Indexed
// Job's pods: the completion index as a label (1.28+) and an annotation
// (which JOB_COMPLETION_INDEX is set from).
const (
	indexLabel      = "batch.kubernetes.io/job-completion-index"
	indexAnnotation = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
)

// workload is a pod template of a Job or StatefulSet, with its party
// container.
type workload struct {
	m        manifest
	ns, name string
	job      *batchv1.Job        // nil for a StatefulSet
	sts      *appsv1.StatefulSet // nil for a Job
	tmpl     *corev1.PodTemplateSpec
	c        *corev1.Container // the one container
	bin      string            // the binary the container runs: modelowner, dataowner or dealer
	flags    map[string]string // its -name=value arguments (a bare -name is "true")
}

func (w *workload) String() string { return fmt.Sprintf("%s %s/%s", w.m, w.ns, w.name) }

// indexed says whether w is an Indexed Job, and how many indices it has.
func (w *workload) indexed() (bool, int) {
	if w.job == nil || w.job.Spec.CompletionMode == nil || *w.job.Spec.CompletionMode != batchv1.IndexedCompletion || w.job.Spec.Completions == nil {
		return false, 0
	}
	return true, int(*w.job.Spec.Completions)
}

// worker says whether w runs a party's worker (-worker), coordinator whether
// it runs a party's coordinator.
func (w *workload) worker() bool      { return w.flags["worker"] == "true" }
func (w *workload) coordinator() bool { return w.bin != "dealer" && !w.worker() }

// parseArgs reads a container's arguments, which the manifests write as
// -name=value or, for a boolean, -name alone (one form, so that this test
// needs no flag set; the binaries' own flag sets parse them in
// TestManifestCommandLines).
func parseArgs(args []string) (map[string]string, error) {
	flags := map[string]string{}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") {
			return nil, fmt.Errorf("argument %q: want -name=value or -name", a)
		}
		name, value, ok := strings.Cut(a[1:], "=")
		if !ok {
			value = "true"
		}
		if _, dup := flags[name]; dup {
			return nil, fmt.Errorf("flag -%s given twice", name)
		}
		flags[name] = value
	}
	return flags, nil
}

// checker is what the checks need of a *testing.T: tChecker is one, a
// recorder another (it collects the failures of a manifest made wrong on
// purpose).
type checker interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Run(name string, f func(checker))
}

type tChecker struct{ *testing.T }

func (t tChecker) Run(name string, f func(checker)) {
	t.T.Run(name, func(t *testing.T) { f(tChecker{t}) })
}

// recorder records failures; Fatalf ends the running check (as
// testing.T's does, by runtime.Goexit in the check's own goroutine).
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Run(name string, f func(checker)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}

// cluster is every decoded manifest, indexed for the checks.
type cluster struct {
	ms         []manifest
	text       map[string]string // file -> its text
	namespaces map[string]string // directory -> its Namespace
	services   map[string][]*corev1.Service
	secrets    map[string]*corev1.Secret                // ns/name
	configMaps map[string]*corev1.ConfigMap             // ns/name
	pvcs       map[string]*corev1.PersistentVolumeClaim // ns/name
	policies   map[string][]*networkingv1.NetworkPolicy
	workloads  []*workload
}

// loadCluster decodes the manifests in fsys and indexes them; every
// workload runs one container of a peer binary with -name=value arguments,
// and every object of a directory is in the namespace its namespace.yaml
// declares.
func loadCluster(t checker, fsys fs.FS) *cluster {
	t.Helper()
	ms, err := loadManifests(fsys)
	if err != nil {
		t.Fatalf("%v", err)
	}
	c := &cluster{ms: ms, text: map[string]string{}, namespaces: map[string]string{}, services: map[string][]*corev1.Service{},
		secrets: map[string]*corev1.Secret{}, configMaps: map[string]*corev1.ConfigMap{},
		pvcs: map[string]*corev1.PersistentVolumeClaim{}, policies: map[string][]*networkingv1.NetworkPolicy{}}
	for _, m := range ms {
		if _, ok := c.text[m.file]; !ok {
			b, err := fs.ReadFile(fsys, m.file)
			if err != nil {
				t.Fatalf("%v", err)
			}
			c.text[m.file] = string(b)
		}
		if ns, ok := m.obj.(*corev1.Namespace); ok {
			dir := path.Dir(m.file)
			if old, dup := c.namespaces[dir]; dup {
				t.Errorf("%s: a second Namespace (%s) in %s/ after %s", m, ns.Name, dir, old)
			}
			c.namespaces[dir] = ns.Name
		}
	}
	for _, m := range ms {
		add := func(w *workload) {
			w.m = m
			if len(w.tmpl.Spec.Containers) != 1 {
				t.Errorf("%s: %d containers, want 1", w, len(w.tmpl.Spec.Containers))
				return
			}
			w.c = &w.tmpl.Spec.Containers[0]
			if len(w.c.Command) != 1 {
				t.Errorf("%s: command %q: want the binary's path alone (its flags in args)", w, w.c.Command)
				return
			}
			w.bin = path.Base(w.c.Command[0])
			if !slices.Contains([]string{"modelowner", "dataowner", "dealer"}, w.bin) {
				t.Errorf("%s: runs %q, not one of the peer binaries", w, w.c.Command[0])
				return
			}
			flags, err := parseArgs(w.c.Args)
			if err != nil {
				t.Errorf("%s: %v", w, err)
				return
			}
			w.flags = flags
			c.workloads = append(c.workloads, w)
		}
		switch o := m.obj.(type) {
		case *corev1.Namespace:
			continue
		case *corev1.Service:
			c.services[o.Namespace] = append(c.services[o.Namespace], o)
		case *corev1.Secret:
			c.secrets[o.Namespace+"/"+o.Name] = o
		case *corev1.ConfigMap:
			c.configMaps[o.Namespace+"/"+o.Name] = o
		case *corev1.PersistentVolumeClaim:
			c.pvcs[o.Namespace+"/"+o.Name] = o
		case *networkingv1.NetworkPolicy:
			c.policies[o.Namespace] = append(c.policies[o.Namespace], o)
		case *batchv1.Job:
			add(&workload{ns: o.Namespace, name: o.Name, job: o, tmpl: &o.Spec.Template})
		case *appsv1.StatefulSet:
			add(&workload{ns: o.Namespace, name: o.Name, tmpl: &o.Spec.Template, sts: o})
		default:
			t.Errorf("%s: no check for %T", m, o)
		}
		// Every object of a party's directory is in that party's namespace.
		type namespaced interface{ GetNamespace() string }
		if o, ok := m.obj.(namespaced); ok {
			if want := c.namespaces[path.Dir(m.file)]; o.GetNamespace() != want || want == "" {
				t.Errorf("%s: namespace %q, want %q (the Namespace of %s/)", m, o.GetNamespace(), want, path.Dir(m.file))
			}
		}
	}
	return c
}

// party returns the coordinator and the worker Job of the party binary bin.
func (c *cluster) party(t checker, bin string) (coord, workers *workload) {
	t.Helper()
	for _, w := range c.workloads {
		if w.bin != bin {
			continue
		}
		p := &coord
		if w.worker() {
			p = &workers
		}
		if *p != nil {
			t.Fatalf("%s and %s: two %s workloads of the same role", *p, w, bin)
		}
		*p = w
	}
	if coord == nil || workers == nil {
		t.Fatalf("%s: want a coordinator and a worker Job, have %v and %v", bin, coord, workers)
	}
	return coord, workers
}

// selects says whether a Service or NetworkPolicy selector picks w's pods.
// The completion-index label is on every pod of an Indexed Job (for the
// indices below its completions), the pod-name label on every pod of a
// StatefulSet (NAME-i for the ordinals i below its replicas).
func selects(sel map[string]string, w *workload) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if k == indexLabel {
			idx, n := w.indexed()
			i, err := strconv.Atoi(v)
			if !idx || err != nil || i < 0 || i >= n {
				return false
			}
			continue
		}
		if k == appsv1.StatefulSetPodNameLabel {
			if _, ok := stsOrdinal(w, v); !ok {
				return false
			}
			continue
		}
		if w.tmpl.Labels[k] != v {
			return false
		}
	}
	return true
}

// stsOrdinal returns the ordinal of the pod named pod of w's StatefulSet
// (Kubernetes names pod i NAME-i), and whether w is a StatefulSet that has
// such a pod (0 <= i < replicas).
func stsOrdinal(w *workload, pod string) (int, bool) {
	if w.sts == nil || !strings.HasPrefix(pod, w.name+"-") {
		return 0, false
	}
	s := strings.TrimPrefix(pod, w.name+"-")
	i, err := strconv.Atoi(s)
	if err != nil || strconv.Itoa(i) != s || i < 0 || i >= ptrOr(w.sts.Spec.Replicas, 1) {
		return 0, false
	}
	return i, true
}

// containerPort resolves a Service's target port in w's container.
func containerPort(w *workload, target intstr.IntOrString) (int, bool) {
	for _, p := range w.c.Ports {
		if (target.Type == intstr.String && p.Name == target.StrVal) || (target.Type == intstr.Int && p.ContainerPort == target.IntVal) {
			return int(p.ContainerPort), true
		}
	}
	return 0, false
}

// listenPort is the port of a listen address ":7000".
func listenPort(t checker, w *workload, flag string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(w.flags[flag])
	n, err2 := strconv.Atoi(p)
	if err != nil || err2 != nil {
		t.Fatalf("%s: -%s=%q is not an address with a port", w, flag, w.flags[flag])
	}
	return n
}

// dial resolves an address a pod dials, host:port with host a Service's
// name (in ns), or SVC.NS.svc[.cluster.local]: the Service and the pod
// port it reaches on the workload it selects.
func (c *cluster) dial(t checker, from *workload, addr string) (*corev1.Service, *workload, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: dials %q: %v", from, addr, err)
	}
	name, ns := host, from.ns
	if parts := strings.Split(strings.TrimSuffix(host, ".cluster.local"), "."); len(parts) == 3 && parts[2] == "svc" {
		name, ns = parts[0], parts[1]
	} else if strings.Contains(host, ".") {
		t.Fatalf("%s: dials %q: want SERVICE or SERVICE.NAMESPACE.svc", from, addr)
	}
	for _, s := range c.services[ns] {
		if s.Name != name {
			continue
		}
		for _, sp := range s.Spec.Ports {
			if strconv.Itoa(int(sp.Port)) != port {
				continue
			}
			for _, w := range c.workloads {
				if w.ns == ns && selects(s.Spec.Selector, w) {
					if cp, ok := containerPort(w, sp.TargetPort); ok {
						return s, w, cp
					}
				}
			}
			t.Fatalf("%s: dials %s: Service %s/%s port %d reaches no container port", from, addr, ns, name, sp.Port)
		}
		t.Fatalf("%s: dials %s: Service %s/%s has no port %s", from, addr, ns, name, port)
	}
	t.Fatalf("%s: dials %s: no Service %s in namespace %s", from, addr, name, ns)
	return nil, nil, 0
}

// TestManifestsAgree checks what a cluster would only show at run time:
// the shard counts, the names and ports every pod dials, the state volumes
// a restarted worker resumes from, the keys, and the security settings.
func TestManifestsAgree(t *testing.T) {
	tc := tChecker{t}
	checkManifests(tc, loadCluster(tc, os.DirFS(".")))
}

// checkManifests runs the checks of TestManifestsAgree on c.
func checkManifests(t checker, c *cluster) {
	mo, moW := c.party(t, "modelowner")
	do, doW := c.party(t, "dataowner")

	t.Run("shards", func(t checker) {
		k, err := strconv.Atoi(mo.flags["shards"])
		if err != nil || k < 2 {
			t.Fatalf("%s: -shards=%q: want K >= 2", mo, mo.flags["shards"])
		}
		for _, w := range []*workload{mo, do} {
			if w.flags["shards"] != strconv.Itoa(k) {
				t.Errorf("%s: -shards=%q, the model owner's coordinator has %d", w, w.flags["shards"], k)
			}
			if w.flags["workers-listen"] == "" {
				t.Errorf("%s: no -workers-listen for its workers", w)
			}
		}
		for _, w := range []*workload{moW, doW} {
			j := w.job
			if j == nil {
				t.Fatalf("%s: workers must be a Job", w)
			}
			if idx, n := w.indexed(); !idx || n != k || j.Spec.Parallelism == nil || int(*j.Spec.Parallelism) != k {
				t.Errorf("%s: want completionMode Indexed, completions = parallelism = %d (the coordinators' -shards)", w, k)
			}
			if v, ok := w.flags["shard-index"]; ok && v != "$(JOB_COMPLETION_INDEX)" {
				t.Errorf("%s: -shard-index=%s gives every pod one index: leave it out (JOB_COMPLETION_INDEX)", w, v)
			}
		}
	})

	t.Run("restarts", func(t checker) {
		for _, w := range c.workloads {
			if st := w.sts; st != nil {
				// A StatefulSet never runs two pods of one ordinal: each
				// dealer's seeds volume has one pod at a time.
				if st.Spec.Selector == nil || !selects(st.Spec.Selector.MatchLabels, w) {
					t.Errorf("%s: its selector does not match its pod template's labels", w)
				}
				if st.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
					t.Errorf("%s: podManagementPolicy %q, want Parallel (the dealers serve their pairs independently: none waits for another)", w, st.Spec.PodManagementPolicy)
				}
				if r := st.Spec.PersistentVolumeClaimRetentionPolicy; r == nil || r.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType ||
					r.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
					t.Errorf("%s: want persistentVolumeClaimRetentionPolicy Retain when deleted and scaled (a dealer recreated later must keep refusing what it served)", w)
				}
			}
			if w.job == nil {
				continue
			}
			s := w.job.Spec
			if w.tmpl.Spec.RestartPolicy != corev1.RestartPolicyNever || s.PodReplacementPolicy == nil || *s.PodReplacementPolicy != batchv1.Failed {
				t.Errorf("%s: want restartPolicy Never and podReplacementPolicy Failed (a replacement pod starts once the old one is gone, never two on one checkpoint)", w)
			}
			if idx, n := w.indexed(); idx && (s.BackoffLimitPerIndex == nil || *s.BackoffLimitPerIndex < 1 || s.MaxFailedIndexes == nil || int(*s.MaxFailedIndexes) > n) {
				t.Errorf("%s: want backoffLimitPerIndex >= 1 (a failed index is retried) and maxFailedIndexes", w)
			}
			if s.PodFailurePolicy != nil {
				for _, r := range s.PodFailurePolicy.Rules {
					if r.OnExitCodes != nil && r.OnExitCodes.ContainerName != nil && *r.OnExitCodes.ContainerName != w.c.Name {
						t.Errorf("%s: podFailurePolicy names container %q, the pod has %q", w, *r.OnExitCodes.ContainerName, w.c.Name)
					}
				}
			}
		}
	})

	t.Run("state", func(t checker) {
		for _, w := range c.workloads {
			dir := w.flags["state"]
			if w.bin == "dealer" {
				dir = path.Dir(w.flags["seeds"])
			}
			vm, v := mountOf(w, dir)
			if vm != nil && v == nil && w.sts != nil {
				// A StatefulSet's pod's own claim, from its template.
				if ct := claimTemplate(w, vm.Name); ct != nil {
					if vm.ReadOnly || vm.SubPathExpr != "" || !slices.Contains(ct.Spec.AccessModes, corev1.ReadWriteOnce) {
						t.Errorf("%s: state volume %s: want it writable, whole, ReadWriteOnce (one pod's own)", w, vm.Name)
					}
					continue
				}
			}
			if vm == nil || v == nil || v.PersistentVolumeClaim == nil {
				t.Errorf("%s: its state %q is not on a PersistentVolumeClaim: a replacement pod would start without it", w, dir)
				continue
			}
			pvc := c.pvcs[w.ns+"/"+v.PersistentVolumeClaim.ClaimName]
			if pvc == nil {
				t.Errorf("%s: no PersistentVolumeClaim %s", w, v.PersistentVolumeClaim.ClaimName)
				continue
			}
			if vm.ReadOnly || v.PersistentVolumeClaim.ReadOnly {
				t.Errorf("%s: state volume mounted read-only", w)
			}
			if !w.worker() {
				if vm.SubPathExpr != "" {
					t.Errorf("%s: subPathExpr on a single pod's state", w)
				}
				continue
			}
			// K pods share the claim: ReadWriteMany, one directory per index.
			if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
				t.Errorf("%s: the workers' state claim %s is not ReadWriteMany", w, pvc.Name)
			}
			m := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).FindStringSubmatch(vm.SubPathExpr)
			if m == nil {
				t.Errorf("%s: state mount %+v has no subPathExpr with the index: every worker would share one checkpoint", w, vm)
				continue
			}
			if m[1] != "JOB_COMPLETION_INDEX" && !slices.ContainsFunc(w.c.Env, func(e corev1.EnvVar) bool {
				return e.Name == m[1] && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == indexAnnotation
			}) {
				t.Errorf("%s: subPathExpr uses $(%s), which is not the completion index (downward API %s)", w, m[1], indexAnnotation)
			}
		}
	})

	t.Run("internal links", func(t checker) {
		for _, pair := range [][2]*workload{{mo, moW}, {do, doW}} {
			coord, workers := pair[0], pair[1]
			_, to, port := c.dial(t, workers, workers.flags["coordinator"])
			if to != coord || port != listenPort(t, coord, "workers-listen") {
				t.Errorf("%s: -coordinator=%s reaches %s port %d, not %s's -workers-listen", workers, workers.flags["coordinator"], to, port, coord)
			}
		}
	})

	t.Run("coordinators' link", func(t checker) {
		listener, dialer := mo, do
		if mo.flags["listen"] == "" {
			listener, dialer = do, mo
		}
		if listener.flags["listen"] == "" || dialer.flags["connect"] == "" || dialer.flags["listen"] != "" || listener.flags["connect"] != "" {
			t.Fatalf("%s, %s: one coordinator listens (-listen), the other dials (-connect)", mo, do)
		}
		_, to, port := c.dial(t, dialer, dialer.flags["connect"])
		if to != listener || port != listenPort(t, listener, "listen") {
			t.Errorf("%s: -connect=%s reaches %s port %d, not %s's -listen", dialer, dialer.flags["connect"], to, port, listener)
		}
	})

	t.Run("worker pairs", func(t checker) {
		listener, dialer := moW, doW
		if moW.flags["listen"] == "" {
			listener, dialer = doW, moW
		}
		addr := dialer.flags["connect"]
		if listener.flags["listen"] == "" || !strings.Contains(addr, "{shard}") || dialer.flags["listen"] != "" {
			t.Fatalf("%s, %s: one party's workers listen (-listen), the other's dial -connect with {shard} for the index", moW, doW)
		}
		port := listenPort(t, listener, "listen")
		sub := listener.tmpl.Spec.Subdomain
		svc := findService(c, listener.ns, sub)
		if sub == "" || svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone || !selects(svc.Spec.Selector, listener) {
			t.Fatalf("%s: want subdomain naming a headless Service (clusterIP None) that selects its pods, have subdomain %q, Service %v", listener, sub, svc)
		}
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
			cp, ok := containerPort(listener, p.TargetPort)
			return ok && cp == port && int(p.Port) == port
		}) {
			t.Errorf("%s: headless Service %s has no port %d to the workers' -listen", listener, svc.Name, port)
		}
		_, n := listener.indexed()
		for k := range n {
			got := strings.ReplaceAll(addr, "{shard}", strconv.Itoa(k))
			// Kubernetes names the Indexed Job's pod k $(job-name)-k, under its subdomain.
			want := fmt.Sprintf("%s-%d.%s.%s.svc:%d", listener.name, k, sub, listener.ns, port)
			if got != want && got != strings.Replace(want, ".svc:", ".svc.cluster.local:", 1) {
				t.Errorf("%s: worker %d dials %s, but %s's pod %d is %s", dialer, k, got, listener, k, want)
			}
		}
		// Optional per-index Services (two clusters): one per index, each
		// selecting its index's pod on the pair port.
		var seen []int
		for _, s := range c.services[listener.ns] {
			v, ok := s.Spec.Selector[indexLabel]
			if !ok {
				continue
			}
			i, _ := strconv.Atoi(v)
			if !selects(s.Spec.Selector, listener) || slices.Contains(seen, i) {
				t.Errorf("%s: Service %s selects index %q: not one distinct index of %s", s.Namespace, s.Name, v, listener)
			}
			seen = append(seen, i)
			if len(s.Spec.Ports) != 1 || int(s.Spec.Ports[0].Port) != port {
				t.Errorf("Service %s: want the one pair port %d", s.Name, port)
			}
		}
		if len(seen) != 0 && len(seen) != n {
			t.Errorf("%d per-index Services for %d indices", len(seen), n)
		}
	})

	t.Run("public parameters", func(t checker) {
		for _, f := range []string{"budget", "bootstrap", "schedule", "batch", "workers", "appraisal", "shards", "provider"} {
			if mo.flags[f] != do.flags[f] {
				t.Errorf("-%s: model owner %q, data owner %q: both pass the same value", f, mo.flags[f], do.flags[f])
			}
		}
		for _, w := range []*workload{moW, doW} {
			if w.flags["provider"] != mo.flags["provider"] {
				t.Errorf("%s: -provider=%q, the coordinators %q", w, w.flags["provider"], mo.flags["provider"])
			}
		}
	})

	t.Run("dealer", func(t checker) {
		var dealer *workload
		for _, w := range c.workloads {
			if w.bin == "dealer" {
				if dealer != nil {
					t.Fatalf("%s and %s: two dealer workloads; the dealers are one StatefulSet", dealer, w)
				}
				dealer = w
			}
		}
		if dealer == nil {
			t.Fatalf("no dealer")
		}
		st := dealer.sts
		if st == nil {
			t.Fatalf("%s: want a StatefulSet, one dealer per worker pair", dealer)
		}
		k, _ := strconv.Atoi(mo.flags["shards"])
		if st.Spec.Replicas == nil || int(*st.Spec.Replicas) != k {
			t.Errorf("%s: replicas %d, want %d: one dealer per worker pair (the coordinators' -shards)", dealer, ptrOr(st.Spec.Replicas, 1), k)
		}
		// Who dials which dealer, per party: worker j dealer j, the
		// coordinators one they share.
		conns := map[string]map[int]int{} // party binary -> dealer ordinal -> connections
		coordDealer := map[string]int{}
		for _, w := range []*workload{mo, moW, do, doW} {
			if w.flags["provider"] != "dealer" {
				continue
			}
			listen := map[string]string{"modelowner": "listen-p0", "dataowner": "listen-p1"}[w.bin]
			addr := w.flags["dealer"]
			if conns[w.bin] == nil {
				conns[w.bin] = map[int]int{}
			}
			if !w.worker() {
				if strings.Contains(addr, "{shard}") {
					t.Errorf("%s: -dealer=%s: a coordinator has no shard index ({shard} is refused)", w, addr)
					continue
				}
				to, i, port := c.dialPod(t, w, addr)
				if to != dealer || port != listenPort(t, dealer, listen) {
					t.Errorf("%s: -dealer=%s reaches %s port %d, not the dealer's -%s", w, addr, to, port, listen)
				}
				coordDealer[w.bin] = i
				conns[w.bin][i]++
				continue
			}
			if !strings.Contains(addr, "{shard}") {
				t.Errorf("%s: -dealer=%s has no {shard}: every worker would share one dealer host, whose links then carry every pair's dealer traffic", w, addr)
				continue
			}
			_, n := w.indexed()
			for j := range n {
				got := strings.ReplaceAll(addr, "{shard}", strconv.Itoa(j))
				to, i, port := c.dialPod(t, w, got)
				if to != dealer || i != j || port != listenPort(t, dealer, listen) {
					t.Errorf("%s: worker %d dials %s: %s's pod %d port %d, want dealer %d's -%s", w, j, got, to, i, port, j, listen)
				}
				conns[w.bin][i]++
			}
		}
		if a, b := coordDealer["modelowner"], coordDealer["dataowner"]; len(coordDealer) == 2 && a != b {
			t.Errorf("the model owner's coordinator dials dealer %d, the data owner's dealer %d: both must meet at one dealer (their session)", a, b)
		}
		busiest := 0
		for _, per := range conns {
			for _, n := range per {
				busiest = max(busiest, n)
			}
		}
		maxConns := 4 // the dealer's default
		if v, ok := dealer.flags["max-conns"]; ok {
			var err error
			if maxConns, err = strconv.Atoi(v); err != nil || maxConns == 0 {
				maxConns = 4
			}
		}
		if maxConns < busiest+1 {
			t.Errorf("%s: -max-conns=%d: a party holds %d connections at once at one dealer, want at least %d (room for a replaced pod's reconnection)", dealer, maxConns, busiest, busiest+1)
		}
	})

	t.Run("public Services", func(t checker) {
		for _, m := range c.ms {
			checkPublicService(t, c, m)
		}
	})

	t.Run("dealers' public Services", func(t checker) {
		for _, w := range c.workloads {
			if w.bin == "dealer" && w.sts != nil {
				checkDealersExternal(t, c, w)
			}
		}
	})

	t.Run("keys", func(t checker) {
		pins := map[string]map[string]string{
			"modelowner": {"peer-fingerprint": "dataowner.crt", "dealer-fingerprint": "dealer.crt"},
			"dataowner":  {"peer-fingerprint": "modelowner.crt", "dealer-fingerprint": "dealer.crt"},
			"dealer":     {"p0-fingerprint": "modelowner.crt", "p1-fingerprint": "dataowner.crt"},
		}
		for _, w := range c.workloads {
			for f, file := range pins[w.bin] {
				if v, ok := w.flags[f]; ok && path.Base(v) != file {
					t.Errorf("%s: -%s=%s: want the file %s", w, f, v, file)
				}
			}
			// Every file flag under a Secret or ConfigMap mount names a key
			// of it, and every such volume exists.
			for f, v := range w.flags {
				vm, vol := mountOf(w, v)
				if vm == nil || vol == nil {
					continue
				}
				var keys []string
				switch {
				case vol.Secret != nil:
					s := c.secrets[w.ns+"/"+vol.Secret.SecretName]
					if s == nil {
						t.Errorf("%s: no Secret %s", w, vol.Secret.SecretName)
						continue
					}
					for k := range s.StringData {
						keys = append(keys, k)
					}
					for k := range s.Data {
						keys = append(keys, k)
					}
				case vol.ConfigMap != nil:
					cm := c.configMaps[w.ns+"/"+vol.ConfigMap.Name]
					if cm == nil {
						t.Errorf("%s: no ConfigMap %s", w, vol.ConfigMap.Name)
						continue
					}
					for k := range cm.Data {
						keys = append(keys, k)
					}
				default:
					continue
				}
				if rel := strings.TrimPrefix(v, vm.MountPath+"/"); !slices.Contains(keys, rel) {
					t.Errorf("%s: -%s=%s: %q is not a key of the mounted volume %s (keys %v)", w, f, v, rel, vol.Name, keys)
				}
				if !vm.ReadOnly {
					t.Errorf("%s: keys volume %s mounted writable", w, vol.Name)
				}
			}
			for _, vol := range w.tmpl.Spec.Volumes {
				if p := vol.PersistentVolumeClaim; p != nil && c.pvcs[w.ns+"/"+p.ClaimName] == nil {
					t.Errorf("%s: no PersistentVolumeClaim %s", w, p.ClaimName)
				}
			}
		}
	})

	t.Run("security", func(t checker) {
		for _, w := range c.workloads {
			ps := w.tmpl.Spec.SecurityContext
			if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 {
				t.Errorf("%s: want runAsNonRoot and a non-zero runAsUser", w)
			}
			if a := w.tmpl.Spec.AutomountServiceAccountToken; a == nil || *a {
				t.Errorf("%s: want automountServiceAccountToken false (the binaries never call the API server)", w)
			}
			cs := w.c.SecurityContext
			if cs == nil || cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem || cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation ||
				cs.Capabilities == nil || !slices.Contains(cs.Capabilities.Drop, "ALL") || len(cs.Capabilities.Add) != 0 {
				t.Errorf("%s: want readOnlyRootFilesystem, no privilege escalation, capabilities drop ALL", w)
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := w.c.Resources.Requests[r]; !ok {
					t.Errorf("%s: no %s request", w, r)
				}
				if _, ok := w.c.Resources.Limits[r]; !ok {
					t.Errorf("%s: no %s limit", w, r)
				}
			}
			if w.c.Image != c.workloads[0].c.Image {
				t.Errorf("%s: image %s, %s has %s: one image holds every binary", w, w.c.Image, c.workloads[0], c.workloads[0].c.Image)
			}
		}
	})

	t.Run("services and policies", func(t checker) {
		for ns, svcs := range c.services {
			for _, s := range svcs {
				var hit []*workload
				for _, w := range c.workloads {
					if w.ns == ns && selects(s.Spec.Selector, w) {
						hit = append(hit, w)
					}
				}
				if len(hit) != 1 {
					t.Errorf("Service %s/%s selects %d workloads, want 1", ns, s.Name, len(hit))
					continue
				}
				for _, sp := range s.Spec.Ports {
					cp, ok := containerPort(hit[0], sp.TargetPort)
					if !ok {
						t.Errorf("Service %s/%s port %s: no such container port on %s", ns, s.Name, sp.TargetPort.String(), hit[0])
						continue
					}
					// A NetworkPolicy that selects the pods must let the port in.
					for _, np := range c.policies[ns] {
						if !selects(np.Spec.PodSelector.MatchLabels, hit[0]) {
							continue
						}
						if !slices.ContainsFunc(np.Spec.Ingress, func(r networkingv1.NetworkPolicyIngressRule) bool {
							return slices.ContainsFunc(r.Ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port != nil && p.Port.IntValue() == cp })
						}) {
							t.Errorf("NetworkPolicy %s/%s blocks port %d that Service %s serves", ns, np.Name, cp, s.Name)
						}
					}
				}
			}
		}
	})
}

// checkPublicService checks a Service reachable from outside its cluster
// (type LoadBalancer or NodePort, in m): it keeps each client's own source
// address (externalTrafficPolicy: Local), which the listener behind it
// needs for its per-address handshake bound (transport.Options.MaxPendingPerSource:
// with Cluster, every client would share a node's address, a stranger's
// flood with the parties), and its file says how to narrow it to the
// clients' addresses (loadBalancerSourceRanges).
func checkPublicService(t checker, c *cluster, m manifest) {
	t.Helper()
	s, ok := m.obj.(*corev1.Service)
	if !ok || (s.Spec.Type != corev1.ServiceTypeLoadBalancer && s.Spec.Type != corev1.ServiceTypeNodePort) {
		return
	}
	if s.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		t.Errorf("Service %s/%s: externalTrafficPolicy %q, want Local (a public Service: the listener's per-address handshake bound and loadBalancerSourceRanges need the client's own address)", s.Namespace, s.Name, s.Spec.ExternalTrafficPolicy)
	}
	if !strings.Contains(c.text[m.file], "loadBalancerSourceRanges") {
		t.Errorf("%s: Service %s/%s is public, but its file does not say how to narrow it to the clients' addresses (loadBalancerSourceRanges)", m, s.Namespace, s.Name)
	}
}

// checkDealersExternal checks the optional per-dealer public Services
// (dealer/dealers-external.yaml, for the dealers in a cluster of their own):
// those that select a pod by the StatefulSet pod-name label. There is
// exactly one per replica of the dealers' StatefulSet (the file is the
// reference for a third organisation's cluster, so it must be there); ordinal
// k's is a LoadBalancer selecting exactly pod NAME-k among the StatefulSet's
// pods (its pod-name label and every label of the StatefulSet's selector),
// and its ports are the dealer's two listen ports, each to the container
// port of that number (party 0's -listen-p0, party 1's -listen-p1).
func checkDealersExternal(t checker, c *cluster, dealer *workload) {
	t.Helper()
	n := ptrOr(dealer.sts.Spec.Replicas, 1)
	want := map[int]bool{listenPort(t, dealer, "listen-p0"): true, listenPort(t, dealer, "listen-p1"): true}
	byOrdinal := map[int][]string{}
	for _, s := range c.services[dealer.ns] {
		pod, ok := s.Spec.Selector[appsv1.StatefulSetPodNameLabel]
		if !ok {
			continue
		}
		i, ok := stsOrdinal(dealer, pod)
		if !ok {
			t.Errorf("Service %s/%s selects pod %q: not a pod of %s (pods %s-0 .. %s-%d)", s.Namespace, s.Name, pod, dealer, dealer.name, dealer.name, n-1)
			continue
		}
		byOrdinal[i] = append(byOrdinal[i], s.Name)
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
			t.Errorf("Service %s/%s: type %q, want LoadBalancer (dealer %d's public address)", s.Namespace, s.Name, s.Spec.Type, i)
		}
		if sel := dealer.sts.Spec.Selector; sel != nil {
			for k, v := range sel.MatchLabels {
				if s.Spec.Selector[k] != v {
					t.Errorf("Service %s/%s: selector %s=%q, want %q as the StatefulSet %s's pods (pod %s of %s only)", s.Namespace, s.Name, k, s.Spec.Selector[k], v, dealer.name, pod, dealer)
				}
			}
		}
		seen := map[int]bool{}
		for _, sp := range s.Spec.Ports {
			cp, ok := containerPort(dealer, sp.TargetPort)
			if !ok || cp != int(sp.Port) || !want[cp] {
				t.Errorf("Service %s/%s port %d (target %s): want the dealer's listen ports %v, each to the container port of that number", s.Namespace, s.Name, sp.Port, sp.TargetPort.String(), slices.Sorted(maps.Keys(want)))
				continue
			}
			seen[cp] = true
		}
		if len(seen) != len(want) {
			t.Errorf("Service %s/%s: ports %v, want both of the dealer's listen ports %v (party 0's and party 1's)", s.Namespace, s.Name, slices.Sorted(maps.Keys(seen)), slices.Sorted(maps.Keys(want)))
		}
	}
	for i := range n {
		switch names := byOrdinal[i]; len(names) {
		case 1:
		case 0:
			t.Errorf("no external Service selects pod %s-%d: want one per replica of %s (%d)", dealer.name, i, dealer, n)
		default:
			slices.Sort(names)
			t.Errorf("Services %s all select pod %s-%d: want one per dealer", strings.Join(names, ", "), dealer.name, i)
		}
	}
}

// mountOf returns the volume mount holding file path p in w's container
// (the longest mount path that is p or a parent of it) and its volume
// (nil where the pod has none of that name: a StatefulSet's claim
// template, see claimTemplate, or a mistake).
func mountOf(w *workload, p string) (*corev1.VolumeMount, *corev1.Volume) {
	var best *corev1.VolumeMount
	for i, vm := range w.c.VolumeMounts {
		if (p == vm.MountPath || strings.HasPrefix(p, vm.MountPath+"/")) && (best == nil || len(vm.MountPath) > len(best.MountPath)) {
			best = &w.c.VolumeMounts[i]
		}
	}
	if best == nil {
		return nil, nil
	}
	for i, v := range w.tmpl.Spec.Volumes {
		if v.Name == best.Name {
			return best, &w.tmpl.Spec.Volumes[i]
		}
	}
	return best, nil // not a pod volume: a StatefulSet's claim template, or none
}

// dialPod resolves an address a pod dials, POD.SUBDOMAIN.NS.svc[.cluster.local]:PORT,
// the stable name of a StatefulSet's pod (SUBDOMAIN its serviceName)
// under a headless Service: the workload, the pod's ordinal and the
// container port; the headless Service must select the workload and list
// the port.
func (c *cluster) dialPod(t checker, from *workload, addr string) (*workload, int, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	p, err2 := strconv.Atoi(port)
	if err != nil || err2 != nil {
		t.Fatalf("%s: dials %q: not host:port", from, addr)
	}
	parts := strings.Split(strings.TrimSuffix(host, ".cluster.local"), ".")
	if len(parts) != 4 || parts[3] != "svc" {
		t.Fatalf("%s: dials %q: want POD.SERVICE.NAMESPACE.svc, a StatefulSet pod's stable name", from, addr)
	}
	pod, sub, ns := parts[0], parts[1], parts[2]
	for _, w := range c.workloads {
		if w.ns != ns || w.sts == nil || w.sts.Spec.ServiceName != sub {
			continue
		}
		i, err := strconv.Atoi(strings.TrimPrefix(pod, w.name+"-"))
		if !strings.HasPrefix(pod, w.name+"-") || err != nil || i < 0 || w.sts.Spec.Replicas == nil || i >= int(*w.sts.Spec.Replicas) {
			t.Fatalf("%s: dials %s: no pod %s in %s (pods %s-0 .. %s-%d)", from, addr, pod, w, w.name, w.name, ptrOr(w.sts.Spec.Replicas, 1)-1)
		}
		svc := findService(c, ns, sub)
		if svc == nil || svc.Spec.ClusterIP != corev1.ClusterIPNone || !selects(svc.Spec.Selector, w) {
			t.Fatalf("%s: dials %s: %s's serviceName %s is not a headless Service (clusterIP None) selecting its pods", from, addr, w, sub)
		}
		if !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool {
			cp, ok := containerPort(w, sp.TargetPort)
			return ok && cp == p && int(sp.Port) == p
		}) {
			t.Fatalf("%s: dials %s: headless Service %s/%s has no port %d to a container port of %s", from, addr, ns, sub, p, w)
		}
		return w, i, p
	}
	t.Fatalf("%s: dials %s: no StatefulSet with serviceName %s in namespace %s", from, addr, sub, ns)
	return nil, 0, 0
}

// ptrOr is *p, or def for nil.
func ptrOr(p *int32, def int) int {
	if p == nil {
		return def
	}
	return int(*p)
}

// claimTemplate returns w's StatefulSet's volume claim template name.
func claimTemplate(w *workload, name string) *corev1.PersistentVolumeClaim {
	for i, ct := range w.sts.Spec.VolumeClaimTemplates {
		if ct.Name == name {
			return &w.sts.Spec.VolumeClaimTemplates[i]
		}
	}
	return nil
}

func findService(c *cluster, ns, name string) *corev1.Service {
	for _, s := range c.services[ns] {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// dealerExternal1 is dealer 1's public Service in dealer/dealers-external.yaml.
const dealerExternal1 = `---
apiVersion: v1
kind: Service
metadata:
  name: dealer-1-external
  namespace: selectformer-dealer
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector:
    app.kubernetes.io/name: selectformer
    app.kubernetes.io/component: dealer
    statefulset.kubernetes.io/pod-name: dealer-1
  ports:
    - name: p0
      port: 7100
      targetPort: p0
    - name: p1
      port: 7101
      targetPort: p1
`

// TestManifestChecksCatch makes the manifests wrong one way at a time and
// checks that TestManifestsAgree's checks name the fault (and find none in
// the manifests as they are).
func TestManifestChecksCatch(t *testing.T) {
	files := fstest.MapFS{}
	err := fs.WalkDir(os.DirFS("."), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p)
		files[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(fsys fs.FS) []string {
		r := &recorder{}
		r.Run("load", func(t checker) { checkManifests(r, loadCluster(r, fsys)) })
		return r.msgs
	}
	if msgs := check(files); len(msgs) != 0 {
		t.Fatalf("the manifests as they are: %q", msgs)
	}
	for _, tc := range []struct{ file, old, new, want string }{
		{"dataowner/workers.yaml", "completions: 4", "completions: 3", "completions = parallelism = 4"},
		{"modelowner/coordinator.yaml", "-shards=4", "-shards=2", "the model owner's coordinator has 2"},
		{"modelowner/workers.yaml", "{shard}.dataowner-workers.", "{shard}.dataowner-worker.", "worker 3 dials dataowner-worker-3.dataowner-worker."},
		{"dataowner/workers.yaml", "clusterIP: None", "clusterIP: 10.0.0.9", "headless Service"},
		{"dataowner/workers.yaml", "subdomain: dataowner-workers", "subdomain: dataowner-pods", "subdomain"},
		{"dataowner/workers.yaml", "subPathExpr: worker-$(SHARD_INDEX)", "subPath: worker", "every worker would share one checkpoint"},
		{"modelowner/workers.yaml", "fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']", "fieldPath: metadata.name", "not the completion index"},
		{"modelowner/storage.yaml", `accessModes: ["ReadWriteMany"]`, `accessModes: ["ReadWriteOnce"]`, "not ReadWriteMany"},
		{"dataowner/workers.yaml", "- name: state\n          persistentVolumeClaim:\n            claimName: dataowner-state", "- name: state\n          emptyDir: {}", "not on a PersistentVolumeClaim"},
		{"modelowner/workers.yaml", "restartPolicy: Never", "restartPolicy: OnFailure", "restartPolicy Never"},
		{"dataowner/workers.yaml", "podReplacementPolicy: Failed", "podReplacementPolicy: TerminatingOrFailed", "podReplacementPolicy Failed"},
		{"modelowner/workers.yaml", "backoffLimitPerIndex: 6", "backoffLimit: 6", "backoffLimitPerIndex"},
		{"modelowner/workers.yaml", "containerName: modelowner", "containerName: worker", `names container "worker"`},
		{"modelowner/workers.yaml", "- -worker\n", "- -worker\n            - -shard-index=0\n", "-shard-index=0"},
		{"dataowner/coordinator.yaml", "runAsNonRoot: true", "runAsNonRoot: false", "runAsNonRoot"},
		{"dealer/dealer.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem"},
		{"modelowner/workers.yaml", `drop: ["ALL"]`, `drop: ["NET_RAW"]`, "capabilities drop ALL"},
		{"modelowner/workers.yaml", "automountServiceAccountToken: false", "automountServiceAccountToken: true", "automountServiceAccountToken"},
		{"dataowner/workers.yaml", "              memory: 8Gi\n", "", "no memory limit"},
		{"dealer/dealer.yaml", "image: registry.example.com/selectformer:latest", "image: selectformer:other", "one image holds every binary"},
		{"dataowner/coordinator.yaml", "-budget=4000", "-budget=4001", "-budget"},
		{"dataowner/workers.yaml", "-provider=dealer", "-provider=he", "-provider"},
		{"dealer/dealer.yaml", "- -max-conns=4", "- -max-conns=2", "-max-conns=2: a party holds 2 connections"},
		{"modelowner/workers.yaml", "-coordinator=modelowner-coordinator:7300", "-coordinator=modelowner-coordinator:7301", "no port 7301"},
		{"dataowner/workers.yaml", "-coordinator=dataowner-coordinator:7300", "-coordinator=modelowner-coordinator:7300", "no Service modelowner-coordinator"},
		{"modelowner/coordinator.yaml", "-connect=dataowner-peer.selectformer-do.svc:7000", "-connect=dataowner-coordinator.selectformer-do.svc:7300", "port 7300, not dataowner/coordinator.yaml (document 3) selectformer-do/dataowner-coordinator's -listen"},
		{"modelowner/coordinator.yaml", "-dealer=dealer-0.dealers.selectformer-dealer.svc:7100", "-dealer=dealer-0.dealers.selectformer-dealer.svc:7101", "-listen-p0"},
		{"dataowner/keys.example.yaml", "  dealer.crt:", "  dealr.crt:", `"dealer.crt" is not a key`},
		{"dataowner/workers.yaml", "secretName: dataowner-identity", "secretName: dataowner-id", "no Secret dataowner-id"},
		{"modelowner/coordinator.yaml", "claimName: modelowner-data", "claimName: modelowner-date", "no PersistentVolumeClaim modelowner-date"},
		{"dealer/dealer.yaml", "-p0-fingerprint=/etc/selectformer/peers/modelowner.crt", "-p0-fingerprint=/etc/selectformer/peers/dataowner.crt", "want the file modelowner.crt"},
		{"dataowner/networkpolicy.yaml", "- port: 7001", "- port: 7002", "blocks port 7001"},
		{"dataowner/workers.yaml", "targetPort: pair", "targetPort: peer", "port peer: no such container port"},
		{"dataowner/workers-external.yaml", `job-completion-index: "3"`, `job-completion-index: "2"`, "not one distinct index"},
		{"modelowner/coordinator.yaml", "  namespace: selectformer-mo", "  namespace: selectformer-do", `namespace "selectformer-do", want "selectformer-mo"`},
		{"dealer/dealer.yaml", "-seeds=/seeds/dealer.seeds", "-seeds=/tmp/dealer.seeds", "not on a PersistentVolumeClaim"},
		// One dealer per worker pair: the workers' and the dealers' names,
		// ports and counts agree.
		{"dealer/dealer.yaml", "replicas: 4", "replicas: 3", "dealer: replicas 3, want 4: one dealer per worker pair"},
		{"dealer/dealer.yaml", "replicas: 4", "replicas: 5", "want 4: one dealer per worker pair"},
		{"dealer/dealer.yaml", "replicas: 4", "replicas: 3", "no pod dealer-3"},
		{"dealer/dealer.yaml", "podManagementPolicy: Parallel", "podManagementPolicy: OrderedReady", "Parallel"},
		{"dealer/dealer.yaml", "whenDeleted: Retain", "whenDeleted: Delete", "Retain"},
		{"dealer/dealer.yaml", "serviceName: dealers", "serviceName: dealer", "no StatefulSet with serviceName dealers"},
		{"dealer/dealer.yaml", "  name: dealers\n", "  name: dealer-pods\n", "serviceName dealers is not a headless Service"},
		{"dealer/dealer.yaml", "clusterIP: None", "clusterIP: 10.0.0.8", "not a headless Service"},
		{"dealer/dealer.yaml", "      port: 7101\n", "      port: 7102\n", "has no port 7101"},
		{"dealer/dealer.yaml", "      metadata:\n        name: seeds", "      metadata:\n        name: seed", "not on a PersistentVolumeClaim"},
		{"dealer/dealer.yaml", `accessModes: ["ReadWriteOnce"]`, `accessModes: ["ReadOnlyMany"]`, "ReadWriteOnce"},
		{"modelowner/workers.yaml", "-dealer=dealer-{shard}.", "-dealer=dealer-0.", "has no {shard}"},
		{"dataowner/workers.yaml", "-dealer=dealer-{shard}.dealers.selectformer-dealer.svc:7101", "-dealer=dealer-{shard}.dealers.selectformer-dealer.svc:7100", "want dealer 0's -listen-p1"},
		{"modelowner/workers.yaml", "dealer-{shard}.dealers.selectformer-dealer", "dealer-{shard}.dealer.selectformer-dealer", "no StatefulSet with serviceName dealer "},
		{"modelowner/workers.yaml", "dealer-{shard}.dealers.selectformer-dealer.svc", "dealer-{shard}.selectformer-dealer.svc", "want POD.SERVICE.NAMESPACE.svc"},
		{"dataowner/coordinator.yaml", "-dealer=dealer-0.", "-dealer=dealer-1.", "the model owner's coordinator dials dealer 0, the data owner's dealer 1"},
		{"modelowner/coordinator.yaml", "-dealer=dealer-0.", "-dealer=dealer-{shard}.", "a coordinator has no shard index"},
		{"dealer/dealer.yaml", "  selector:\n    matchLabels:\n      app.kubernetes.io/name: selectformer\n      app.kubernetes.io/component: dealer", "  selector:\n    matchLabels:\n      app.kubernetes.io/name: selectformer\n      app.kubernetes.io/component: dealr", "selector does not match"},
		// The dealers' public Services (dealers-external.yaml): one per
		// replica, each selecting its own pod on both listen ports.
		{"dealer/dealers-external.yaml", dealerExternal1, "", "no external Service selects pod dealer-1"},
		{"dealer/dealers-external.yaml", "pod-name: dealer-3", "pod-name: dealer-2", "Services dealer-2-external, dealer-3-external all select pod dealer-2"},
		{"dealer/dealers-external.yaml", "pod-name: dealer-3", "pod-name: dealer-2", "no external Service selects pod dealer-3"},
		{"dealer/dealers-external.yaml", "pod-name: dealer-1", "pod-name: dealer-4", `dealer-1-external selects pod "dealer-4": not a pod of`},
		{"dealer/dealers-external.yaml", "pod-name: dealer-1", "pod-name: dealer-01", `dealer-1-external selects pod "dealer-01": not a pod of`},
		{"dealer/dealers-external.yaml", "pod-name: dealer-1", "pod-name: dealers-1", `dealer-1-external selects pod "dealers-1": not a pod of`},
		{"dealer/dealers-external.yaml", "      port: 7101\n", "      port: 7102\n", "dealer-0-external port 7102 (target p1): want the dealer's listen ports [7100 7101]"},
		{"dealer/dealers-external.yaml", "      targetPort: p1\n", "      targetPort: p0\n", "dealer-0-external port 7101 (target p0)"},
		{"dealer/dealers-external.yaml", "    - name: p1\n      port: 7101\n      targetPort: p1\n", "", "dealer-0-external: ports [7100], want both"},
		{"dealer/dealers-external.yaml", "type: LoadBalancer", "type: ClusterIP", `dealer-0-external: type "ClusterIP", want LoadBalancer`},
		{"dealer/dealers-external.yaml", "  externalTrafficPolicy: Local\n", "", `dealer-0-external: externalTrafficPolicy "", want Local`},
		// Every public Service keeps its clients' addresses and says how
		// to narrow them.
		{"dealer/dealers-external.yaml", "with loadBalancerSourceRanges", "with source ranges", "dealer-0-external is public, but its file does not say how to narrow it"},
		{"dataowner/workers-external.yaml", "  externalTrafficPolicy: Local\n", "", `dataowner-worker-0-external: externalTrafficPolicy "", want Local`},
		{"dataowner/workers-external.yaml", "  externalTrafficPolicy: Local\n", "  externalTrafficPolicy: Cluster\n", `dataowner-worker-0-external: externalTrafficPolicy "Cluster", want Local`},
		{"dataowner/workers-external.yaml", "with loadBalancerSourceRanges", "with source ranges", "dataowner-worker-3-external is public, but its file does not say how to narrow it"},
		{"dataowner/coordinator.yaml", "type: ClusterIP", "type: LoadBalancer", `dataowner-peer: externalTrafficPolicy "", want Local`},
		{"dataowner/coordinator.yaml", "type: ClusterIP", "type: NodePort", `dataowner-peer: externalTrafficPolicy "", want Local`},
		{"dealer/dealers-external.yaml", "    app.kubernetes.io/component: dealer\n", "", `dealer-0-external: selector app.kubernetes.io/component=""`},
		{"dealer/dealer.yaml", "replicas: 4", "replicas: 5", "no external Service selects pod dealer-4"},
		{"dealer/dealer.yaml", "replicas: 4", "replicas: 3", `dealer-3-external selects pod "dealer-3": not a pod of`},
	} {
		name := tc.new
		if name == "" {
			// A deletion: name it by what it deletes.
			name = "without " + strings.Join(strings.Fields(strings.TrimPrefix(tc.old, "---")), " ")
			name = name[:min(len(name), 80)]
		}
		t.Run(tc.file+": "+name, func(t *testing.T) {
			orig := string(files[tc.file].Data)
			mod := strings.Replace(orig, tc.old, tc.new, 1)
			if mod == orig {
				t.Fatalf("%q is not in %s", tc.old, tc.file)
			}
			fsys := maps.Clone(files)
			fsys[tc.file] = &fstest.MapFile{Data: []byte(mod)}
			msgs := check(fsys)
			if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, tc.want) }) {
				t.Errorf("no failure names %q; failures: %q", tc.want, msgs)
			}
		})
	}
	// Without dealers-external.yaml the dealers have no public address.
	t.Run("without dealer/dealers-external.yaml", func(t *testing.T) {
		fsys := maps.Clone(files)
		delete(fsys, "dealer/dealers-external.yaml")
		msgs := check(fsys)
		for i := range 4 {
			want := fmt.Sprintf("no external Service selects pod dealer-%d", i)
			if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, want) }) {
				t.Errorf("no failure names %q; failures: %q", want, msgs)
			}
		}
	})
}
