package purchase

import (
	"errors"
	"fmt"
	"io"
	"slices"
)

// Expect is what a delivery must hold: the openings of the purchased
// candidates Indices (ascending, distinct) against the commitment Root to
// the pool of PoolSize candidates that the model owner recorded in the
// selection.
type Expect struct {
	Root     Root
	PoolSize int
	Indices  []int
}

// check refuses an expectation that no delivery could meet.
func (e Expect) check() error {
	if e.PoolSize <= 0 || e.PoolSize > MaxPool {
		return fmt.Errorf("purchase: verify: a pool of %d candidates", e.PoolSize)
	}
	if !sortedDistinct(e.Indices) || len(e.Indices) > 0 && (e.Indices[0] < 0 || e.Indices[len(e.Indices)-1] >= e.PoolSize) {
		return fmt.Errorf("purchase: verify: the purchased indices are not ascending and distinct in 0..%d", e.PoolSize-1)
	}
	return nil
}

// ErrForeignBundle is wrapped by Verify's error when the bundle opens
// another commitment than the selection's (another session, or another
// pool).
var ErrForeignBundle = errors.New("the bundle belongs to another session or pool")

// Item is the verdict on one purchased candidate, or on a record of the
// bundle that no purchased candidate accounts for.
type Item struct {
	// Index is the candidate's pool index.
	Index int `json:"index"`
	// Position is the record's place in the bundle (0 first), -1 for a
	// purchased candidate that the bundle lacks.
	Position int `json:"position"`
	// Problem is what is wrong with it ("" once verified).
	Problem string `json:"problem,omitempty"`
	// Audit is its audit (nil when not audited).
	Audit *ItemAudit `json:"audit,omitempty"`
}

// The problems of an item (Item.Problem).
const (
	ProblemMissing      = "missing from the bundle"
	ProblemAltered      = "its data, salt or path do not match the commitment: not the candidate committed to"
	ProblemOutOfOrder   = "out of order: its record follows a record of a larger index"
	ProblemNotPurchased = "not a purchased candidate"
	ProblemTwice        = "a second record of a candidate"
	ProblemUnread       = "not read: the bundle broke off before it"
)

// Report is Verify's account of a bundle.
type Report struct {
	// Header is the bundle's header.
	Header Header `json:"header"`
	// Items holds one verdict per purchased candidate, in the order of
	// Expect.Indices.
	Items []Item `json:"items"`
	// Extra holds records beyond the purchased candidates (not purchased,
	// or a candidate's second record), at most MaxExtra; ExtraCount counts
	// them all.
	Extra      []Item `json:"extra,omitempty"`
	ExtraCount int    `json:"extra_count,omitempty"`
	// Verified counts the purchased candidates whose record opens the
	// commitment, in order; Failed those with a problem.
	Verified int `json:"verified"`
	Failed   int `json:"failed"`
	// Audited counts the verified candidates the audit checked, Flagged
	// those it flagged (an outcome contradicted beyond the tolerance, or a
	// candidate it could not score).
	Audited int `json:"audited"`
	Flagged int `json:"flagged"`
	// Suspects counts the flagged candidates marked ItemAudit.Suspect: the
	// fewest (greedily) whose scores explain every contradicted outcome;
	// SuspectsFound says whether the audit looked for them (at most 8,192
	// audited candidates a phase).
	Suspects      int  `json:"suspects"`
	SuspectsFound bool `json:"suspects_found"`
}

// MaxExtra bounds Report.Extra.
const MaxExtra = 100

// OK reports whether every purchased candidate was delivered, in order,
// with nothing else, and the audit flagged none.
func (r *Report) OK() bool { return r.Failed == 0 && r.ExtraCount == 0 && r.Flagged == 0 }

// Verify reads the bundle r record by record and checks it against want:
// every purchased candidate's record, in ascending index, each opening the
// commitment; it names each candidate that fails (missing, out of order,
// altered) and each record that should not be there. With a, it audits the
// verified candidates' scores (see Audit). Memory: one item and its path,
// a batch of the audit's items, and a verdict per purchased candidate,
// whatever the bundle's size.
//
// The error is not nil when the bundle cannot be read to its end (a
// malformed or cut bundle: the report then covers what was read, the rest
// reported ProblemUnread), when it opens another commitment (wrapping
// ErrForeignBundle: no record is read), or when the audit fails; the
// report is nil only when the header is unreadable or want is invalid.
func Verify(r io.Reader, want Expect, a *Audit) (*Report, error) {
	if err := want.check(); err != nil {
		return nil, err
	}
	var au *auditor
	if a != nil {
		var err error
		if au, err = newAuditor(a, want.Indices); err != nil {
			return nil, err
		}
	}
	br, err := NewBundleReader(r)
	if err != nil {
		return nil, err
	}
	h := br.Header()
	rep := &Report{Header: h, Items: make([]Item, len(want.Indices))}
	for k, i := range want.Indices {
		rep.Items[k] = Item{Index: i, Position: -1, Problem: ProblemMissing}
	}
	if h.Root != want.Root || h.PoolSize != want.PoolSize {
		for k := range rep.Items {
			rep.Items[k].Problem = ProblemUnread
		}
		rep.Failed = len(rep.Items)
		return rep, fmt.Errorf("purchase: verify: %w: it opens root %.16s… of a pool of %d, the selection's data owner committed to root %.16s… of a pool of %d",
			ErrForeignBundle, h.Root, h.PoolSize, want.Root, want.PoolSize)
	}
	seen := make([]bool, len(want.Indices))
	last := -1
	var readErr error
	for pos := 0; ; pos++ {
		op, err := br.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		k, purchased := slices.BinarySearch(want.Indices, op.Index)
		switch {
		case !purchased:
			rep.extra(Item{Index: op.Index, Position: pos, Problem: ProblemNotPurchased})
			continue
		case seen[k]:
			rep.extra(Item{Index: op.Index, Position: pos, Problem: ProblemTwice})
			continue
		}
		seen[k] = true
		it := &rep.Items[k]
		it.Position, it.Problem = pos, ""
		switch {
		case op.Index < last:
			it.Problem = ProblemOutOfOrder
		case VerifyOpening(want.Root, want.PoolSize, op) != nil:
			it.Problem = ProblemAltered
		}
		last = max(last, op.Index)
		if it.Problem == "" && au != nil {
			if err := au.add(k, op.Item); err != nil {
				return rep, err
			}
		}
	}
	if readErr != nil {
		for k := range rep.Items {
			if !seen[k] {
				rep.Items[k].Problem = ProblemUnread
			}
		}
	}
	for _, it := range rep.Items {
		if it.Problem != "" {
			rep.Failed++
		} else {
			rep.Verified++
		}
	}
	if au != nil {
		if err := au.finish(rep); err != nil {
			return rep, err
		}
	}
	if readErr != nil {
		return rep, fmt.Errorf("purchase: verify: %w", readErr)
	}
	return rep, nil
}

// extra records a record that no purchased candidate accounts for.
func (r *Report) extra(it Item) {
	r.ExtraCount++
	if len(r.Extra) < MaxExtra {
		r.Extra = append(r.Extra, it)
	}
}
