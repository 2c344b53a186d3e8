//go:build !race

package exampletest

const raceEnabled = false
