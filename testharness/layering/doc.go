// Package layering holds the tests of the module's shape; it has no code of
// its own. TestImportsPointDown: every library package imports only packages
// below it in DESIGN.md's order, and an ancestor directory's package only
// where parentImports names that import. TestImportErrorsCatch plants
// forbidden imports (selection/lanes → selection among them) and checks that
// they fail. TestDesignListsEveryPackage: DESIGN.md's "Packages" section
// names every package of the module. TestAsmVectorEncodings: no amd64
// assembly function that touches YMM or ZMM registers runs a legacy SSE
// instruction or returns without VZEROUPPER (a state transition on Intel
// server cores: issue 38), with TestAsmVectorEncodingsCatch planting both.
package layering
