//go:build race

package host_test

// raceEnabled shortens the longest loops under the race detector, which
// slows guest calls by an order of magnitude.
const raceEnabled = true
