// Package testhook is the door through which the tests of selection's
// subpackages (selection/shard's, which run whole selections) reach what
// package selection keeps for its own tests: it holds hooks that package
// selection sets when it initialises. Being internal, it is out of reach
// of every importer outside selection's tree, so no user of the public API
// can set what a hook sets.
package testhook

import "io"

// SetCoinSource, set by package selection, makes owner (a
// *selection.ModelOwner or *selection.DataOwner) draw its contribution to
// the coin toss from src instead of crypto/rand, so that a test repeats a
// selection (the same coin, the same bootstrap sample and pivots). Any
// other owner is ignored.
var SetCoinSource func(owner any, src io.Reader)
