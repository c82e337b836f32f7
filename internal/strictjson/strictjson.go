// Package strictjson decodes one JSON document strictly, as the decoders of
// files and peer messages need: unknown object fields are errors, and so is
// anything but white space after the value.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// ErrTrailingData is Unmarshal's error for data after the JSON value.
var ErrTrailingData = errors.New("trailing data after the JSON value")

// Unmarshal decodes the JSON value in b into v, refusing fields that v's
// type does not have (json.Decoder.DisallowUnknownFields) and any data after
// the value but white space (ErrTrailingData). Unlike a check of
// json.Decoder.More, a stray closing bracket or brace after the value is
// refused too.
func Unmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ErrTrailingData
	}
	return nil
}
