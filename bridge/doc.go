// Package bridge serves JSON-RPC 2.0 over HTTP in front of a gRPC backend.
// It owns the envelope, batches, notifications, dispatch and the HTTP
// statuses. It does not read configuration or walk descriptors: it is given
// a Catalog of methods and a gRPC connection, and maps messages through
// package mapping.
package bridge
