package marks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/internal/strictjson"
)

type markJSON struct {
	Version  int               `json:"version"`
	Party    int               `json:"party"`
	Sessions []markSessionJSON `json:"sessions"`
}

type markSessionJSON struct {
	ID      string            `json:"id"`
	Marks   map[uint32]uint64 `json:"marks"`
	Weights uint64            `json:"weights"`
}

// decodeMarkFile parses and validates a mark file. It never panics; every
// error wraps ErrBadFile.
func decodeMarkFile(b []byte) (*markFile, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadFile, fmt.Sprintf(format, args...))
	}
	if len(b) > maxMarkFile {
		return nil, bad("%d bytes, at most %d", len(b), maxMarkFile)
	}
	var j markJSON
	if err := strictjson.Unmarshal(b, &j); err != nil {
		return nil, bad("%v", err)
	}
	if j.Version != markVersion {
		return nil, bad("version %d, want %d", j.Version, markVersion)
	}
	if j.Party != 0 && j.Party != 1 {
		return nil, bad("party %d", j.Party)
	}
	if len(j.Sessions) > maxMarkSessions {
		return nil, bad("%d sessions, at most %d", len(j.Sessions), maxMarkSessions)
	}
	f := &markFile{party: j.Party, sessions: make(map[beaver.SessionID]*markRecord, len(j.Sessions))}
	for i, s := range j.Sessions {
		id, err := beaver.ParseSessionID(s.ID)
		if err != nil || id.IsZero() {
			return nil, bad("session %d: id %q", i, s.ID)
		}
		if _, dup := f.sessions[id]; dup {
			return nil, bad("session %s listed twice", id.Short())
		}
		if len(s.Marks) > beaver.MaxSessionStreams {
			return nil, bad("session %s: %d streams, at most %d", id.Short(), len(s.Marks), beaver.MaxSessionStreams)
		}
		marks := s.Marks
		if marks == nil {
			marks = map[uint32]uint64{}
		}
		f.sessions[id] = &markRecord{marks: marks, weights: s.Weights}
	}
	return f, nil
}

// encode returns the file's bytes (sessions in id order).
func (f *markFile) encode() ([]byte, error) {
	j := markJSON{Version: markVersion, Party: f.party, Sessions: make([]markSessionJSON, 0, len(f.sessions))}
	ids := make([]beaver.SessionID, 0, len(f.sessions))
	for id := range f.sessions {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b beaver.SessionID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range ids {
		r := f.sessions[id]
		j.Sessions = append(j.Sessions, markSessionJSON{ID: id.String(), Marks: r.marks, Weights: r.weights})
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("beaver: encode marks: %w", err)
	}
	return append(b, '\n'), nil
}

// loadMarkFile reads the mark file at path; nil when it does not exist.
func loadMarkFile(path string) (*markFile, error) {
	b, err := atomicfile.ReadLimited(path, maxMarkFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if errors.Is(err, atomicfile.ErrTooLarge) {
		return nil, fmt.Errorf("beaver: marks %s: %w: %w", path, ErrBadFile, err)
	}
	if err != nil {
		return nil, fmt.Errorf("beaver: marks %s: %w", path, err)
	}
	f, err := decodeMarkFile(b)
	if err != nil {
		return nil, fmt.Errorf("beaver: marks %s: %w", path, err)
	}
	return f, nil
}
