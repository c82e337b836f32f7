// Package source names the sources of a party's correlated randomness, in
// the spirit of circl's kem/schemes.ByName: one name, one Source. The peer
// binaries' -provider and mpcbench's --provider parse a name here, once,
// at the edge, and from then on hold a Source; nothing else compares
// source names.
//
// Built in: "dealer" (a dealer host, beaver/dealer), "ot" (no dealer: the
// parties make every correlation by oblivious transfer over their own
// connection, beaver/ot) and "he" (as "ot", with the products with the
// model owner's weights made by lattice encryption, ot.Lattice). Adding a
// source is one file with one Register call in its init function; the
// binaries then accept its name.
package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/transport"
)

// Source is one way of making a party's correlated randomness.
type Source struct {
	// Name is what -provider takes.
	Name string
	// Doc says in a few words where the randomness comes from.
	Doc string
	// DealerFree reports whether the two parties make the randomness
	// themselves over their own connection, with no dealer: its traffic
	// then crosses the parties' link, and no dealer flags apply.
	DealerFree bool
	// Open opens the source for env.Party: it connects what the source
	// needs in the source's order (a dealer before the peer, so that a
	// dealer's refusal ends the party before it waits for its peer),
	// calls env.Peer once, and returns the party's provider, not yet
	// bound to a session. On an error it closes what it opened, the
	// connection env.Peer returned included.
	Open func(ctx context.Context, env Env) (Opened, error)
}

// Env is what opening a source needs: who the party is and how it
// reaches the others.
type Env struct {
	// Party is 0 (model owner) or 1 (data owner).
	Party int
	// Peer returns the parties' own connection, establishing it (a
	// listener waits for the peer, a dialler dials it). Open calls it
	// once.
	Peer func(ctx context.Context) (*transport.Conn, error)
	// Dealer connects the party to its dealer and returns the party's
	// provider from it and what closes that connection. Nil where the
	// party has no dealer: a source that needs one fails to open.
	Dealer func(ctx context.Context) (beaver.Provider, io.Closer, error)
}

// Opened is an opened source.
type Opened struct {
	// Provider is the party's provider, to be bound to the session
	// (beaver.Provider.BindSession) before use.
	Provider beaver.Provider
	// Conn is the parties' connection (from Env.Peer); the caller closes
	// it.
	Conn *transport.Conn
	// Closer closes what the source opened beside Conn (the dealer's
	// connection); never nil. The caller closes it when done.
	Closer io.Closer
}

// Default is the name of the source the binaries use unless told
// otherwise.
const Default = "dealer"

var (
	mu     sync.RWMutex
	byName = map[string]Source{}
	names  []string // in registration order
)

// Register adds s. It must be called from an init function: it panics (a
// programming error) on an empty name, a name with a blank or a comma, a
// nil Open, or a name already registered.
func Register(s Source) {
	switch {
	case s.Name == "" || strings.ContainsAny(s.Name, " \t\n,="):
		panic(fmt.Sprintf("source: register %q: not a flag value", s.Name))
	case s.Open == nil:
		panic(fmt.Sprintf("source: register %q: nil Open", s.Name))
	}
	mu.Lock()
	defer mu.Unlock()
	if _, ok := byName[s.Name]; ok {
		panic(fmt.Sprintf("source: register %q: already registered", s.Name))
	}
	byName[s.Name] = s
	names = append(names, s.Name)
}

// ByName returns the source registered under name, and false (with the
// zero Source, which is not DealerFree) if there is none.
func ByName(name string) (Source, bool) {
	mu.RLock()
	defer mu.RUnlock()
	s, ok := byName[name]
	return s, ok
}

// Names returns the registered names in registration order (the built-in
// ones first: dealer, ot, he).
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return append([]string(nil), names...)
}

// Choices lists the registered names for a message: "dealer, ot or he".
func Choices() string {
	n := Names()
	if len(n) <= 1 {
		return strings.Join(n, "")
	}
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}

// Usage describes the registered sources for a flag's help, each name
// with its Doc: "dealer (…), ot (…) or he (…)".
func Usage() string {
	mu.RLock()
	defer mu.RUnlock()
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s (%s)", n, byName[n].Doc)
	}
	if len(parts) <= 1 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// InProcess returns the Env of party in a process that holds both
// parties: their connection is already open (conn), and its dealer, if
// any, is a provider in hand (an in-process dealer's, or a networked
// dealer's client connected by the caller; nil for none).
func InProcess(party int, conn *transport.Conn, dealer beaver.Provider) Env {
	env := Env{Party: party, Peer: func(context.Context) (*transport.Conn, error) { return conn, nil }}
	if dealer != nil {
		env.Dealer = func(context.Context) (beaver.Provider, io.Closer, error) { return dealer, nopCloser{}, nil }
	}
	return env
}

// errNoDealer is a dealer source's error in an Env without a dealer.
var errNoDealer = errors.New("no dealer to connect to")

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// DealerFree reports whether the source registered under name is
// dealer-free (false for a name no source has): for reports that record a
// run's source by its name.
func DealerFree(name string) bool {
	s, _ := ByName(name)
	return s.DealerFree
}
