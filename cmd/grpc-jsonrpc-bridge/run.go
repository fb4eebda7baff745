package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

// Exit codes of run.
const (
	exitOK      = 0 // clean shutdown
	exitFailure = 1 // the bridge failed while running
	exitUsage   = 2 // bad arguments, flags or configuration
)

// exitError carries the exit code of an error returned by a subcommand.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as the user's to fix: exit code 2.
func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

// failure marks err as a runtime failure: exit code 1.
func failure(err error) error { return &exitError{code: exitFailure, err: err} }

// run executes the command line args and returns the process exit code.
// It returns when ctx is done and everything it started has stopped.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "grpc-jsonrpc-bridge: %v\n", err)
	// The help to read is that of the command that failed.
	path := root.CommandPath()
	if cmd != nil {
		path = cmd.CommandPath()
	}
	var e *exitError
	if errors.As(err, &e) {
		if e.code == exitUsage {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", path)
		}
		return e.code
	}
	// Errors of cobra's own: an unknown command or flag, bad arguments.
	fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", path)
	return exitUsage
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "grpc-jsonrpc-bridge",
		Short: "A JSON-RPC 2.0 front for any gRPC backend",
		Long: "grpc-jsonrpc-bridge discovers a gRPC backend's services by server reflection (or\n" +
			"reads them from --protoset or --proto files) and serves each method, unary and\n" +
			"streaming, as a JSON-RPC 2.0 method named <package>.<Service>.<Method> at POST /\n" +
			"and over WebSocket at GET /ws, with liveness at GET /healthz and readiness at\n" +
			"GET /readyz.",
		// No Args: cobra then answers an unknown command with suggestions.
		RunE: func(*cobra.Command, []string) error {
			return usageError(errors.New("missing command: try serve, demo, mcp, openrpc, list or describe"))
		},
		Version:       version(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("grpc-jsonrpc-bridge {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newServeCmd(stdout, stderr), newDemoCmd(stdout, stderr), newOpenRPCCmd(stdout, stderr),
		newListCmd(stdout, stderr), newDescribeCmd(stdout, stderr), newMCPCmd(stdout, stderr), newVersionCmd(stdout))
	return root
}

// flagError adds to an unknown flag error of cmd that cmd does not take
// that setting's flag, or else the nearest flags cmd has.
func flagError(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	if config.IsFlag(name) {
		return fmt.Errorf("%w: %s does not take it (it is a flag of serve)", err, cmd.CommandPath())
	}
	if near := config.Suggest(name, names); len(near) > 0 {
		return fmt.Errorf("%w: %s", err, config.DidYouMean(near, func(n string) string { return "--" + n }))
	}
	return err
}
