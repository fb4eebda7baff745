package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// mcpKeys are the settings the mcp command takes as flags.
var mcpKeys = append(slices.Clone(sourceKeys), "max_call_timeout", "emit_unpopulated", "direct_calls", "refresh_interval",
	"metadata.request_headers", "max_response_bytes", "log_level", "log_format", "access_log")

func newMCPCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp --backend HOST:PORT | --protoset FILE | --proto FILE [-I DIR]",
		Short: "Serve the methods as Model Context Protocol tools over stdio",
		Long: "mcp serves every unary and server-streaming method as an MCP tool on standard\n" +
			"input and output, for agents that start their MCP servers as local processes\n" +
			"(docs/mcp.md); logs go to standard error only. The tools are those serve offers\n" +
			"at /mcp, called as POST / calls them, with no authentication: the process is\n" +
			"the agent's user's. It ends when standard input closes.\n\n" + sourcesHelp +
			" With\n--protoset or --proto and no backend, tools are listed but calls fail with\n" +
			"UNAVAILABLE.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, log, err := settingsAndLogger(cmd, stderr)
			if err != nil {
				return err
			}
			return serveMCP(cmd.Context(), s, log, stderr, cmd.InOrStdin(), stdout)
		},
	}
	config.RegisterOnly(cmd.Flags(), mcpKeys...)
	return cmd
}

// mcpDiscoveryWait bounds how long the mcp command waits for the first
// discovery before it answers the client: tools discovered later are
// announced with notifications/tools/list_changed.
const mcpDiscoveryWait = 10 * time.Second

// serveMCP serves the MCP tools of the services s describes over in and
// out until in ends or ctx is done. Discovery goes on as for serve
// (refresh_interval, a backend reconnecting), each change announced.
func serveMCP(ctx context.Context, s config.Settings, log *slog.Logger, logOut io.Writer, in io.Reader, out io.Writer) error {
	access, closeAccess, err := newAccessLog(s, logOut)
	if err != nil {
		return usageError(err)
	}
	defer closeAccess()
	var files *bridgereflect.Registry
	if s.Descriptors.Enabled() {
		if files, err = loadDescriptors(ctx, s); err != nil {
			return usageError(err)
		}
	}
	backends := s.BackendList()
	if files == nil && len(backends) == 0 {
		return usageError(errors.New("no descriptor source: give --backend HOST:PORT, --protoset FILE or --proto FILE"))
	}
	sources := make([]bridgereflect.Source, 0, len(backends))
	dial := bridge.BackendDialOptions(bridgeOptions(s, parts{}))
	for _, b := range backends {
		conn, err := backendConn(b, s.LB(b), s.DirectCalls, s.BackendKeepalive, log, dial...)
		if err != nil {
			return usageError(err)
		}
		defer conn.Close()
		sources = append(sources, bridgereflect.Source{Name: backendName(b), Conn: conn, Include: b.Include, Exclude: b.Exclude})
	}
	var conn grpc.ClientConnInterface = noBackend{}
	if len(sources) == 1 {
		conn = sources[0].Conn
	}
	srv := bridge.New(conn, bridgeOptions(s, parts{log: log, access: access}))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	var discoveryErr error // written before cancel, read after wg.Wait
	if files != nil {
		srv.Update(files)
		log.Info("mcp: serving the services of the descriptor files", "methods", len(files.Methods()))
	} else {
		first := make(chan struct{})
		watcher := bridgereflect.NewWatcher(sources, bridgereflect.WatchOptions{
			Interval: s.RefreshInterval,
			Retry:    bridgereflect.RetryOptions{Logger: log},
		})
		wg.Go(func() {
			var once sync.Once
			if err := watcher.Run(ctx, func(c *bridgereflect.Catalog) {
				srv.Update(c)
				once.Do(func() { close(first) })
			}); err != nil {
				log.Error("mcp: cannot serve these backends together", "error", err)
				discoveryErr = err
				cancel()
			}
		})
		t := time.NewTimer(mcpDiscoveryWait)
		select {
		case <-first:
		case <-t.C:
			log.Warn("mcp: the backends' services are not discovered yet; serving, and announcing the tools when they are", "waited", mcpDiscoveryWait.String())
		case <-ctx.Done():
		}
		t.Stop()
	}
	log.Info("mcp: serving on stdio")
	err = srv.MCP().ServeStdio(ctx, in, out)
	cancel()
	wg.Wait()
	if discoveryErr != nil {
		return failure(discoveryErr)
	}
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, io.EOF):
		log.Info("mcp: stopped")
		return nil
	}
	return failure(fmt.Errorf("mcp: %w", err))
}

// noBackend is the connection of the mcp command without a backend
// (descriptor files only): every call fails with UNAVAILABLE.
type noBackend struct{}

var errNoBackend = status.Error(codes.Unavailable, "no backend: the mcp command was started with descriptor files and no --backend")

func (noBackend) Invoke(context.Context, string, any, any, ...grpc.CallOption) error {
	return errNoBackend
}

func (noBackend) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, errNoBackend
}
