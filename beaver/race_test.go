//go:build race

package beaver

const raceEnabled = true
