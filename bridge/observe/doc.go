// Package observe records what the bridge does: Prometheus metrics
// (Metrics, served at GET /metrics) and the access log, one line per call
// and per refused request. An Observer is a dispatch.Binder: the Guard it
// binds to each table is told of every finished call with its code as a
// value (Done), and Refused is told of every request the front door
// refuses.
//
// Entry points: NewMetrics (for cmd), Observer.Bind, Observer.Refused.
// It imports the engine's types (dispatch) and Prometheus, no transport.
// Files: metrics.go (Metrics and its collectors), observer.go (the Guard
// of each table, Refused).
package observe
