package party

import (
	"errors"
	"fmt"

	"github.com/selectformer/selectformer/selection"
)

// FlagMismatch is a handshake mismatch (a *selection.MismatchError) as the
// party binaries report it: named by the flag that sets the value on each
// side, both values written as the flag takes them (-schedule
// 2:4:8@0.4,2:4:16@1, not the hello's JSON), and what to change. Both
// parties compare both hellos, so both report it, before the coin: nothing
// was drawn and no bootstrap sent. Its exit code is peer.ExitUsage (a
// configuration to fix, not a peer failure).
type FlagMismatch struct {
	// Party is the reporting party (0 model owner, 1 data owner).
	Party int
	// Err is the library's mismatch.
	Err *selection.MismatchError
}

// flagOf names, for a handshake field, the flag that sets it on each
// side (by party: model owner, data owner) and how that flag writes a
// value v.
type flagOf struct {
	name  [2]string
	write [2]func(v string) string
	// hint says what to change.
	hint string
}

// as writes v as the value of flag name ("(none)" as "").
func as(name string) func(string) string {
	return func(v string) string {
		if v == "(none)" {
			v = `""`
		}
		return name + " " + v
	}
}

// alike is a flag both parties pass alike.
func alike(name string) flagOf {
	return flagOf{name: [2]string{name, name}, write: [2]func(string) string{as(name), as(name)},
		hint: "both parties must pass the same " + name}
}

// heParams writes the digest of the HE parameters.
func heParams(v string) string { return "-provider he (HE parameters " + v + ")" }

// mismatchFlags maps the handshake fields that flags of the party
// binaries set (selection.MismatchFields) to those flags.
var mismatchFlags = map[string]flagOf{
	"provider": alike("-provider"),
	"provider_params": {name: [2]string{"-provider", "-provider"}, write: [2]func(string) string{heParams, heParams},
		hint: "the two binaries make the HE correlations with different parameters: run the same selectformer version on both sides"},
	"pool_size": {name: [2]string{"-pool-size", "-pool"}, write: [2]func(string) string{as("-pool-size"),
		func(v string) string { return "a -pool of " + v + " candidates" }},
		hint: "the model owner's -pool-size must be the number of candidates in the data owner's -pool"},
	"budget":     alike("-budget"),
	"bootstrap":  alike("-bootstrap"),
	"schedule":   alike("-schedule"),
	"batch_size": alike("-batch"),
	"workers":    alike("-inflight"),
	"appraisal":  alike("-appraisal"),
	"shards":     alike("-shards"),
	"seq": {name: [2]string{"-public-seq", "-seq"}, write: [2]func(string) string{as("-public-seq"), as("-seq")},
		hint: "the model owner's -public texts are tokenized to -public-seq tokens, which must be the data owner's -seq (0 on either side: the checkpoint's max_position_embeddings)"},
	"pool_root": {name: [2]string{"-state", "-pool"}, write: [2]func(string) string{
		func(v string) string { return "-state (the pool root recorded in this session: " + v + ")" },
		func(v string) string { return "-pool (pool root " + v + ")" }},
		hint: "the data owner must resume with the -pool it committed to in this session (and its -state), or both parties start a new session with fresh -state directories"},
	"embedding_hash": {name: [2]string{"-model", "-embedding"}, write: [2]func(string) string{
		func(v string) string { return "-model (embeddings " + v + ")" },
		func(v string) string { return "-embedding (embeddings " + v + ")" }},
		hint: selection.EmbeddingHint},
}

var roleNames = [2]string{"model owner", "data owner"}

// Error says which flag differs, with both values in flag syntax, e.g.
// "handshake: -provider mismatch: this model owner has -provider ot, the
// data owner -provider he; both parties must pass the same -provider". A
// field no flag sets (the protocol version, the fixed-point encoding)
// keeps the library's words.
func (e *FlagMismatch) Error() string {
	f, ok := mismatchFlags[e.Err.Field]
	if !ok || e.Party < 0 || e.Party > 1 {
		return e.Err.Error()
	}
	return fmt.Sprintf("handshake: %s mismatch: this %s has %s, the %s %s; %s", f.name[e.Party],
		roleNames[e.Party], f.write[e.Party](e.Err.Local), roleNames[1-e.Party], f.write[1-e.Party](e.Err.Peer), f.hint)
}

// Unwrap returns the library's mismatch.
func (e *FlagMismatch) Unwrap() error { return e.Err }

// flagMismatch wraps a handshake mismatch in err as party's FlagMismatch
// (keeping err's chain for the log); any other error is returned as it is.
func flagMismatch(party int, err error) error {
	var me *selection.MismatchError
	if !errors.As(err, &me) {
		return err
	}
	return &FlagMismatch{Party: party, Err: me}
}
