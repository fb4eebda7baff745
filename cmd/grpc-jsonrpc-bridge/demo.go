package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
	demov1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/demo/v1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
)

func newDemoCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo [--listen HOST:PORT]",
		Short: "Serve the bridge in front of built-in demo services",
		Long: "demo starts an in-process gRPC server with helloworld.Greeter and demo.v1.Notes\n" +
			"on 127.0.0.1 and serves the bridge in front of it, exactly as serve would. Once\n" +
			"the services are discovered it prints curl commands to try and the URL of the API\n" +
			"explorer (unless --explorer=false).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, log, err := settingsAndLogger(cmd, stderr)
			if err != nil {
				return err
			}
			return demo(cmd.Context(), s, log, stdout, stderr)
		},
	}
	config.RegisterExcept(cmd.Flags(), config.KeyBackend)
	return cmd
}

// demo serves the demo services on a loopback port and the bridge in front
// of them until ctx is done.
func demo(ctx context.Context, s config.Settings, log *slog.Logger, stdout, stderr io.Writer) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return failure(fmt.Errorf("demo backend: %w", err))
	}
	gs := grpc.NewServer()
	helloworld.RegisterGreeterServer(gs, helloworld.Server{})
	demov1.RegisterNotesServer(gs, demov1.NewServer())
	reflection.Register(gs)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := gs.Serve(lis); err != nil {
			log.Error("demo backend stopped", "error", err)
		}
	})
	defer func() {
		gs.Stop()
		wg.Wait()
	}()

	s.Backend, s.Backends = lis.Addr().String(), nil
	log.Info("demo backend listening", "addr", s.Backend)
	return serve(ctx, s, log, stderr, func(addr net.Addr) { printBanner(stdout, addr, s.Backend, s.Explorer) })
}

// printBanner tells how to try the demo served at addr.
func printBanner(w io.Writer, addr net.Addr, backend string, explorer bool) {
	url := "http://" + dialable(addr) + "/"
	fmt.Fprintf(w, "grpc-jsonrpc-bridge demo: JSON-RPC 2.0 at %s\n", url)
	if explorer {
		fmt.Fprintf(w, "API explorer (open it in a browser): %sexplorer\n", url)
	}
	fmt.Fprintf(w, "in front of helloworld.Greeter and demo.v1.Notes (gRPC on %s). Try:\n\n", backend)
	for _, c := range demoCalls() {
		fmt.Fprintf(w, "  # %s\n  curl -s -w '\\n'%s %s -d '%s'\n", c.comment, c.flags, url, c.body)
	}
	fmt.Fprintf(w, "  # readiness: 200 once the backend's services are discovered\n  curl -s -w '\\n' %sreadyz\n\n", url)
	fmt.Fprintf(w, "Press Ctrl+C to stop.\n")
}

// demoCall is one example request of the banner.
type demoCall struct {
	comment string
	flags   string // extra curl flags
	body    string
}

func demoCalls() []demoCall {
	return []demoCall{
		{comment: "a unary call", body: `{"jsonrpc":"2.0","id":1,"method":"helloworld.Greeter.SayHello","params":{"name":"Ada"}}`},
		{comment: "read the welcome note", body: `{"jsonrpc":"2.0","id":2,"method":"demo.v1.Notes.GetNote","params":{"id":"n1"}}`},
		{comment: "create a note", body: `{"jsonrpc":"2.0","id":3,"method":"demo.v1.Notes.CreateNote","params":{"note":{"title":"Groceries","tags":["todo"],"labels":{"shop":"corner"},"priority":"PRIORITY_HIGH"}}}`},
		{comment: "list the notes tagged intro", body: `{"jsonrpc":"2.0","id":4,"method":"demo.v1.Notes.ListNotes","params":{"tags":["intro"]}}`},
		{comment: "a notification: no id, so HTTP 204 and no body", flags: " -i", body: `{"jsonrpc":"2.0","method":"demo.v1.Notes.Increment","params":{"delta":5}}`},
		{comment: "its effect", body: `{"jsonrpc":"2.0","id":5,"method":"demo.v1.Notes.GetCounter"}`},
		{comment: "an error: NOT_FOUND with a google.rpc.ErrorInfo detail", body: `{"jsonrpc":"2.0","id":6,"method":"demo.v1.Notes.GetNote","params":{"id":"nope"}}`},
		{comment: "a batch", body: `[{"jsonrpc":"2.0","id":7,"method":"helloworld.Greeter.SayHello","params":{"name":"Grace"}},{"jsonrpc":"2.0","id":8,"method":"demo.v1.Notes.GetCounter"}]`},
	}
}

// dialable is addr as a client can reach it: an unspecified host (0.0.0.0,
// ::) becomes loopback.
func dialable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}
