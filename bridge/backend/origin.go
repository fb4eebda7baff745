package backend

import (
	"context"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	grpcstats "google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// DialOptions are the options of the grpc-go connections the bridge calls
// backends through: they let it tell a backend's own status from one
// grpc-go made (see Status). Without them every failed call of such a
// connection is answered with a fixed message, never the backend's.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithStatsHandler(originHandler{})}
}

// An Origin records where the status of one grpc-go call came from.
type Origin struct {
	seen     atomic.Bool // the stats handler saw the call: its record holds
	trailers atomic.Bool // the backend's trailers came, and the status in them
	// unary is set by the grpc-go invoker for its calls, whose request is
	// sent whole at once and which wait for one answer: the picker times
	// their answers (see pool.begin).
	unary bool
}

type originKey struct{}

// WithOrigin returns ctx recording the origin of the status of the
// grpc-go call or stream made with it.
func WithOrigin(ctx context.Context) (context.Context, *Origin) {
	o := new(Origin)
	return context.WithValue(ctx, originKey{}, o), o
}

// Remote reports whether st, the call's status, came from the backend:
// the backend's trailers came, and st is not one grpc-go made of the
// message it received before them (too large, not decompressible: the
// reception checks of its rpc_util, whose messages all begin with
// "grpc: "; the backend's status was OK then).
func (o *Origin) Remote(st *status.Status) bool {
	return o.seen.Load() && o.trailers.Load() && !strings.HasPrefix(st.Message(), "grpc: ")
}

// originHandler is the stats handler of DialOptions. grpc-go reports
// InTrailer once it has read the backend's trailers, before it makes the
// call's status of them; statuses of its own (transport failures,
// malformed responses, local deadlines and checks) come without.
type originHandler struct{}

func (originHandler) TagRPC(ctx context.Context, _ *grpcstats.RPCTagInfo) context.Context {
	if o, _ := ctx.Value(originKey{}).(*Origin); o != nil {
		o.seen.Store(true)
	}
	return ctx
}

func (originHandler) HandleRPC(ctx context.Context, s grpcstats.RPCStats) {
	if _, ok := s.(*grpcstats.InTrailer); ok {
		if o, _ := ctx.Value(originKey{}).(*Origin); o != nil {
			o.trailers.Store(true)
		}
	}
}

func (originHandler) TagConn(ctx context.Context, _ *grpcstats.ConnTagInfo) context.Context {
	return ctx
}

func (originHandler) HandleConn(context.Context, grpcstats.ConnStats) {}
