// Package mapping converts JSON-RPC params to protobuf request messages and
// response messages back to JSON, turns gRPC statuses into JSON-RPC errors
// and builds the OpenRPC document from descriptors. It knows nothing about
// HTTP and nothing about how descriptors were discovered.
package mapping
