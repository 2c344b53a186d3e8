//go:build race

package exampletest

// raceEnabled builds the programs with the race detector too when the
// tests run with it.
const raceEnabled = true
