// Package layering holds the test that the module's library packages import
// only packages below them in DESIGN.md's order (see its "Packages"
// section); it has no code of its own.
package layering
