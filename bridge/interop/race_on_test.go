//go:build race

package interop_test

// raceEnabled reports whether the tests run with the race detector; the
// bridge binary they start is then built with it too.
const raceEnabled = true
