// Command keygen creates a host identity for the selectformer peer binaries:
// an Ed25519 key and a self-signed certificate, written as PEM files, and
// prints the identity's fingerprint, which the peers pin (flags
// -peer-fingerprint, -p0-fingerprint, ...).
//
// Usage:
//
//	keygen -name model-owner -out-cert mo.crt -out-key mo.key [-force]
//
// It refuses to overwrite existing files unless -force is given. Exit codes
// are those of examples/README.md (0 ok, 1 failure, 2 usage error).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/transport"
)

// summary is the first line of -h.
const summary = "keygen creates a host identity for the selectformer peer binaries (an Ed25519 key and a self-signed certificate, PEM) and prints its fingerprint."

func main() { peer.Exec("keygen", summary, keygen, nil) }

func keygen(_ context.Context, fs *flag.FlagSet, args []string, stdout, _ io.Writer) error {
	name := fs.String("name", "selectformer", "subject common name of the certificate")
	certPath := fs.String("out-cert", "", "where to write the certificate (PEM, mode 0644); required")
	keyPath := fs.String("out-key", "", "where to write the private key (PEM, mode 0600); required")
	force := fs.Bool("force", false, "overwrite existing files")
	if err := peer.Parse(fs, args); err != nil {
		return err
	}
	if err := peer.Require("out-cert", *certPath, "out-key", *keyPath); err != nil {
		return err
	}
	if *certPath == *keyPath {
		return peer.Usage("-out-cert and -out-key must differ")
	}
	if !*force {
		for _, p := range []string{*certPath, *keyPath} {
			if _, err := os.Stat(p); err == nil {
				return peer.Usage("%s exists; pass -force to overwrite it", p)
			}
		}
	}
	id, err := transport.GenerateIdentity(*name)
	if err != nil {
		return fmt.Errorf("generating identity: %w", err)
	}
	if err := id.Save(*certPath, *keyPath); err != nil {
		return fmt.Errorf("saving identity: %w", err)
	}
	fmt.Fprintln(stdout, id.Fingerprint())
	return nil
}
