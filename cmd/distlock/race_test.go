//go:build race

package main

// raceEnabled builds the distlock binary under test with the race detector
// too when the tests run with it.
const raceEnabled = true
