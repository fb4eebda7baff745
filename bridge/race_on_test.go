//go:build race

package bridge_test

// raceEnabled reports whether the race detector is on, which changes how
// much the code allocates.
const raceEnabled = true
