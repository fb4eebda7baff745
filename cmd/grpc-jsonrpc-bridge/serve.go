package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

func newServeCmd(stdout, stderr io.Writer) *cobra.Command {
	var printConfig, check bool
	cmd := &cobra.Command{
		Use:   "serve --backend HOST:PORT | --config FILE",
		Short: "Serve JSON-RPC in front of gRPC backends",
		Long: "serve discovers the backends' services by server reflection (retrying until they\n" +
			"answer; /readyz turns 200 then) and serves JSON-RPC at POST / until SIGINT or\n" +
			"SIGTERM. SIGHUP rediscovers the services and rereads auth.file and the key set\n" +
			"files (which are also reread when they change). Settings come from flags, BRIDGE_*\n" +
			"variables and --config FILE, highest first; several backends, each with its own\n" +
			"TLS, are configured in the file. A backend without reflection is described by\n" +
			"--protoset FILE or --proto FILE -I DIR instead: /readyz is 200 at once, and\n" +
			"SIGHUP rereads the files. --check validates the settings and the files they\n" +
			"name, as serve would start with them, and exits (0 or 2) without serving.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := loadSettings(cmd)
			if err != nil {
				return usageError(err)
			}
			if check {
				return checkConfig(cmd.Context(), s, stdout, stderr)
			}
			if printConfig {
				out, err := s.YAML()
				if err != nil {
					return failure(err)
				}
				_, err = stdout.Write(out)
				return err
			}
			if len(s.BackendList()) == 0 {
				return usageError(errors.New("no backend: give --backend HOST:PORT, BRIDGE_BACKEND, or backend or backends in the config file"))
			}
			log, err := commandLogger(s, stderr)
			if err != nil {
				return usageError(err)
			}
			return serve(cmd.Context(), s, log, stderr, nil)
		},
	}
	config.Register(cmd.Flags())
	cmd.Flags().BoolVar(&printConfig, "print-config", false, "print the effective configuration as YAML, secrets masked, and exit")
	cmd.Flags().BoolVar(&check, "check", false, "check the configuration as serve would start with it, without listening or dialing, and exit: 0 when it is valid, 2 when not")
	cmd.MarkFlagsMutuallyExclusive("check", "print-config")
	return cmd
}

// checkConfig makes every check serve makes of s before it listens or
// dials a backend (the files it names are read: identities, certificates,
// descriptor sets, the store's password) and says on stdout that s is
// valid; what is wrong is a usage error.
func checkConfig(ctx context.Context, s config.Settings, stdout, stderr io.Writer) error {
	backends := s.BackendList()
	if len(backends) == 0 {
		return usageError(errors.New("no backend: give --backend HOST:PORT, BRIDGE_BACKEND, or backend or backends in the config file"))
	}
	log, err := commandLogger(s, stderr)
	if err != nil {
		return usageError(err)
	}
	if _, err := newAuth(s, log); err != nil { // its providers fetch nothing until run
		return usageError(err)
	}
	if s.Descriptors.Enabled() {
		if _, err := loadDescriptors(ctx, s); err != nil {
			return usageError(err)
		}
	}
	names := make([]string, len(backends))
	for i, b := range backends {
		names[i] = backendName(b)
	}
	_, err = fmt.Fprintf(stdout, "configuration valid: listen %s, backends %s\n", s.Listen, strings.Join(names, ", "))
	return err
}

// loadSettings loads and validates the settings of cmd, including what
// only the bridge can judge: the metadata header names.
func loadSettings(cmd *cobra.Command) (config.Settings, error) {
	return config.Load(cmd.Flags(), engine(), checkHeaders)
}

// settingsAndLogger are the settings of cmd and the command's logger on
// stderr; what keeps either from being made is a usage error.
func settingsAndLogger(cmd *cobra.Command, stderr io.Writer) (config.Settings, *slog.Logger, error) {
	s, err := loadSettings(cmd)
	if err != nil {
		return s, nil, usageError(err)
	}
	log, err := commandLogger(s, stderr)
	if err != nil {
		return s, nil, usageError(err)
	}
	return s, log, nil
}

// checkHeaders refuses metadata header names the bridge never forwards.
func checkHeaders(s config.Settings) []error {
	var errs []error
	for _, list := range []struct {
		key   string
		names []string
	}{{"metadata.request_headers", s.Metadata.RequestHeaders}, {"metadata.response_headers", s.Metadata.ResponseHeaders}} {
		for _, name := range list.names {
			if reason := bridge.ForbiddenHeader(name); reason != "" {
				errs = append(errs, &config.KeyError{Key: list.key, Err: config.ErrInvalidValue, Reason: fmt.Sprintf("%q: %s", name, reason)})
			}
		}
	}
	return errs
}
