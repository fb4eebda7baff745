package bridge

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
// grpc-go made (see statusError). Without them every failed call of such a
// connection is answered with a fixed message, never the backend's.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithStatsHandler(originHandler{})}
}

// statusOrigin records where the status of one grpc-go call came from.
type statusOrigin struct {
	seen     atomic.Bool // the stats handler saw the call: its record holds
	trailers atomic.Bool // the backend's trailers came, and the status in them
}

type originKey struct{}

// withOrigin returns ctx recording the origin of its call's status.
func withOrigin(ctx context.Context) (context.Context, *statusOrigin) {
	o := new(statusOrigin)
	return context.WithValue(ctx, originKey{}, o), o
}

// remote reports whether st, the call's status, came from the backend:
// the backend's trailers came, and st is not one grpc-go made of the
// message it received before them (too large, not decompressible: the
// reception checks of its rpc_util, whose messages all begin with
// "grpc: "; the backend's status was OK then).
func (o *statusOrigin) remote(st *status.Status) bool {
	return o.seen.Load() && o.trailers.Load() && !strings.HasPrefix(st.Message(), "grpc: ")
}

// originHandler is the stats handler of DialOptions. grpc-go reports
// InTrailer once it has read the backend's trailers, before it makes the
// call's status of them; statuses of its own (transport failures,
// malformed responses, local deadlines and checks) come without.
type originHandler struct{}

func (originHandler) TagRPC(ctx context.Context, _ *grpcstats.RPCTagInfo) context.Context {
	if o, _ := ctx.Value(originKey{}).(*statusOrigin); o != nil {
		o.seen.Store(true)
	}
	return ctx
}

func (originHandler) HandleRPC(ctx context.Context, s grpcstats.RPCStats) {
	if _, ok := s.(*grpcstats.InTrailer); ok {
		if o, _ := ctx.Value(originKey{}).(*statusOrigin); o != nil {
			o.trailers.Store(true)
		}
	}
}

func (originHandler) TagConn(ctx context.Context, _ *grpcstats.ConnTagInfo) context.Context {
	return ctx
}

func (originHandler) HandleConn(context.Context, grpcstats.ConnStats) {}
