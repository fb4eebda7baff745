package main

import (
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

func newServeCmd(stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve --backend HOST:PORT",
		Short: "Serve JSON-RPC in front of a gRPC backend",
		Long: "serve discovers the backend's services by server reflection (retrying until it\n" +
			"answers; /readyz turns 200 then) and serves JSON-RPC at POST / until SIGINT or\n" +
			"SIGTERM. Settings come from flags, BRIDGE_* variables and --config FILE, highest first.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := config.Load(cmd.Flags())
			if err != nil {
				return usageError(err)
			}
			if s.Backend == "" {
				return usageError(errors.New("no backend: give --backend HOST:PORT, BRIDGE_BACKEND or backend in the config file"))
			}
			log, err := newLogger(s, stderr)
			if err != nil {
				return usageError(err)
			}
			return serve(cmd.Context(), s, log, nil)
		},
	}
	config.Register(cmd.Flags())
	return cmd
}
