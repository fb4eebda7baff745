//go:build race

package binary

// raceEnabled reports whether this test process runs with the race detector.
const raceEnabled = true
