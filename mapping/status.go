package mapping

import (
	"encoding/base64"
	"encoding/json"
	"strconv"

	// Registers google.rpc.* detail types (ErrorInfo, BadRequest, ...) in
	// protoregistry.GlobalTypes so that every bridge can render them even
	// when the backend's descriptors do not include them.
	_ "google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
)

// codeNames is the canonical name of every gRPC code, indexed by number.
var codeNames = [...]string{
	codes.OK:                 "OK",
	codes.Canceled:           "CANCELLED",
	codes.Unknown:            "UNKNOWN",
	codes.InvalidArgument:    "INVALID_ARGUMENT",
	codes.DeadlineExceeded:   "DEADLINE_EXCEEDED",
	codes.NotFound:           "NOT_FOUND",
	codes.AlreadyExists:      "ALREADY_EXISTS",
	codes.PermissionDenied:   "PERMISSION_DENIED",
	codes.ResourceExhausted:  "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION",
	codes.Aborted:            "ABORTED",
	codes.OutOfRange:         "OUT_OF_RANGE",
	codes.Unimplemented:      "UNIMPLEMENTED",
	codes.Internal:           "INTERNAL",
	codes.Unavailable:        "UNAVAILABLE",
	codes.DataLoss:           "DATA_LOSS",
	codes.Unauthenticated:    "UNAUTHENTICATED",
}

// CodeName returns the canonical name of c as the gRPC specification
// spells it ("NOT_FOUND", "CANCELLED"), unlike codes.Code.String, which
// gives "NotFound". A code outside the table gives "CODE(<number>)".
func CodeName(c codes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "CODE(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// StatusError turns a non-OK gRPC status into a JSON-RPC error:
//
//	{"code": <1..16>, "message": st.Message(),
//	 "data": {"status": "NOT_FOUND", "details": [<detail>, ...]}}
//
// The code is the gRPC code number; OK and codes outside 1..16 become
// UNKNOWN (2), so a backend status never takes a code JSON-RPC reserves.
// An empty status message is replaced by the canonical code name.
//
// "details" is always present, as [] when the status has none, so clients
// need not tell a missing key from an empty list. Each detail is the
// protojson form of its google.protobuf.Any, with "@type", resolved through
// res (the backend's types, then global ones). A detail whose type res
// cannot find, or whose bytes do not parse, becomes
// {"@type": "<type url>", "value": "<base64 of the bytes>"}.
// A nil res means NewResolver(nil).
func StatusError(st *status.Status, res Resolver) *Error {
	if res == nil {
		res = NewResolver(nil)
	}
	code := st.Code()
	if code < codes.Canceled || code > codes.Unauthenticated {
		code = codes.Unknown
	}
	name := CodeName(code)
	msg := st.Message()
	if msg == "" {
		msg = name
	}

	data := make([]byte, 0, 64)
	data = append(data, `{"status":"`...)
	data = append(data, name...) // canonical names need no escaping
	data = append(data, `","details":[`...)
	marshal := protojson.MarshalOptions{Resolver: res}
	for i, d := range st.Proto().GetDetails() {
		if i > 0 {
			data = append(data, ',')
		}
		data = appendDetail(data, d, marshal)
	}
	data = append(data, "]}"...)
	return &Error{Code: Code(code), Message: msg, Data: data}
}

// appendDetail appends the JSON of one status detail to dst.
func appendDetail(dst []byte, d *anypb.Any, marshal protojson.MarshalOptions) []byte {
	if d == nil {
		return append(dst, "null"...)
	}
	if b, err := marshal.Marshal(d); err == nil {
		return append(dst, b...)
	}
	raw, _ := json.Marshal(struct {
		Type  string `json:"@type"`
		Value string `json:"value"`
	}{d.GetTypeUrl(), base64.StdEncoding.EncodeToString(d.GetValue())})
	return append(dst, raw...)
}
