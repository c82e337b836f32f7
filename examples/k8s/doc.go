// Package k8s holds the reference Kubernetes manifests for running a
// sharded selection: per party (directories modelowner, dataowner and, in
// three-party mode, dealer) a coordinator Job, its workers as an Indexed Job
// (completionMode Indexed, one pod per shard, the shard index from
// JOB_COMPLETION_INDEX), a headless Service that gives the listening party's
// worker k a stable name, Secrets for the keys and volumes for the pool and
// the checkpoints; the dealers as a StatefulSet, one per worker pair (worker
// k dials dealer-k, the coordinators dealer 0), with one public LoadBalancer
// Service per dealer for a dealer in its own cluster; and a Dockerfile for the
// peer binaries (static, non-root).
// README.md in this directory explains how each party deploys.
//
// The package has no code: its tests decode every manifest strictly into
// the Kubernetes API types (k8s.io/api; unknown, misspelt or duplicate
// fields refused), check that the manifests agree with each other (shard
// counts, the names the workers dial, the dealer per pair, ports, secrets, non-root security
// settings) and run the peer binaries on each container's command line.
package k8s
