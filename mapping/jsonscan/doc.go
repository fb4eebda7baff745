// Package jsonscan is the one JSON lexer of the module's readers: the
// envelope scan of bridge/wire (which checks every byte of a request
// before anything runs), the strings of mapping's fast path, and
// mapping's account of why protojson refused params. It checks and skips
// RFC 8259 text in place, without allocating, and tells where a text goes
// wrong; it builds no values. It imports nothing of the module, so that
// mapping and bridge/wire, which imports mapping, may both import it.
package jsonscan
