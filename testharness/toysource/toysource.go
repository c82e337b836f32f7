// Package toysource registers a toy source of correlated randomness,
// "toy": the dealer source under another name, counting its openings. It
// is the whole of what adding a source takes — this one file with one
// beaver/source.Register — and the tests of the peer binaries' -provider
// and of mpcbench's --provider import it to show that they accept the new
// name with no other edit.
package toysource

import (
	"context"
	"sync/atomic"

	"github.com/selectformer/selectformer/beaver/source"
)

// Name is the toy source's name.
const Name = "toy"

// Opens counts the toy source's openings (one per party and run).
var Opens atomic.Int64

func init() {
	source.Register(source.Source{
		Name: Name,
		Doc:  "a test's toy: the dealer source under another name",
		Open: func(ctx context.Context, env source.Env) (source.Opened, error) {
			Opens.Add(1)
			d, _ := source.ByName("dealer")
			return d.Open(ctx, env)
		},
	})
}
