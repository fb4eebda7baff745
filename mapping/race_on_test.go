//go:build race

package mapping

// raceEnabled: the race detector is on; sync.Pool then drops items at
// random, so allocation budgets do not hold.
const raceEnabled = true
