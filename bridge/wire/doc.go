// Package wire is the JSON-RPC 2.0 wire of the bridge: it owns "JSON
// bytes" below the engine and the transports. Parse reads a message once
// (a request or a batch, a byte order mark and surrounding space ignored,
// nesting bounded) into Requests whose bytes alias the message; the
// Append functions write replies and stream notifications; the error
// constructors (ParseError, InvalidRequest, InvalidParams, MethodNotFound,
// Status, Refused, Internal) are the only places the bridge's own error
// objects are made. The error type itself is mapping.Error, which the
// params decoder returns too, so that mapping need not import the bridge.
//
// It imports mapping (its Error), mapping/jsonscan (the JSON scanner it
// shares with mapping) and gRPC's status types, nothing of the bridge.
package wire
