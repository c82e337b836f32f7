// Package examples holds the selectformer example programs and their
// end-to-end tests; it has no API of its own.
//
//   - quickstart: all three parties in one process over loopback TLS, on the
//     bundled MNIST subset (go run ./examples/quickstart);
//   - keygen: makes a host identity (certificate, key) and prints its
//     fingerprint;
//   - dealer: the networked dealer of correlated randomness;
//   - modelowner, dataowner: the two parties of a selection, one per host.
//
// See README.md in this directory for the flags, the file formats and the
// exit codes. The tests in this package build the binaries and run them as
// separate processes.
package examples
