package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

func newOpenRPCCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "openrpc --protoset FILE | --proto FILE [-I DIR] | --backend HOST:PORT",
		Short: "Print the OpenRPC document of gRPC services and exit",
		Long: "openrpc prints the OpenRPC document the bridge would serve at GET /openrpc.json,\n" +
			"from a FileDescriptorSet (--protoset), .proto sources (--proto, with -I import\n" +
			"paths; comments become descriptions) or the backends' server reflection\n" +
			"(--backend, or backends in --config FILE). It reads the settings of serve from\n" +
			"BRIDGE_* variables and --config FILE, so --config FILE gives the document that\n" +
			"serve would serve with it; its flags are those that change the document.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, log, err := settingsAndLogger(cmd, stderr)
			if err != nil {
				return err
			}
			methods, err := documentMethods(cmd.Context(), s, log)
			if err != nil {
				return err
			}
			doc, err := mapping.Document(methods, mapping.DocumentOptions{
				Info:            documentInfo(s, dialableListen(s.Listen)),
				EmitUnpopulated: s.EmitUnpopulated,
			})
			if err != nil {
				return failure(err)
			}
			_, err = stdout.Write(doc)
			return err
		},
	}
	config.RegisterOnly(cmd.Flags(), append(slices.Clone(sourceKeys), "emit_unpopulated", "listen", "tls.cert_file", "tls.key_file",
		"openrpc_title", "openrpc_version", "openrpc_description", "openrpc_servers", "log_level", "log_format")...)
	return cmd
}

// documentMethods are the methods of the descriptor files of s or, without
// them, of its backends' reflection.
func documentMethods(ctx context.Context, s config.Settings, log *slog.Logger) ([]protoreflect.MethodDescriptor, error) {
	if s.Descriptors.Enabled() {
		reg, err := loadDescriptors(ctx, s)
		if err != nil {
			return nil, usageError(err)
		}
		return reg.Methods(), nil
	}
	backends := s.BackendList()
	if len(backends) == 0 {
		return nil, usageError(errors.New("no descriptor source: give --protoset FILE, --proto FILE or --backend HOST:PORT"))
	}
	parts := make([]bridgereflect.Part, 0, len(backends))
	for _, b := range backends {
		conn, err := backendConn(b, s.LB(b), false, config.Keepalive{}, log)
		if err != nil {
			return nil, usageError(err)
		}
		defer conn.Close()
		dctx, cancel := context.WithTimeout(ctx, s.CallTimeout)
		reg, err := bridgereflect.Discover(dctx, conn)
		cancel()
		if errors.Is(err, bridgereflect.ErrReflectionUnsupported) {
			return nil, failure(fmt.Errorf("backend %q has no server reflection: describe it with --protoset or --proto: %w", backendName(b), err))
		}
		if err != nil {
			return nil, failure(fmt.Errorf("backend %q: %w", backendName(b), err))
		}
		if reg, err = reg.Filter(b.Include, b.Exclude); err != nil {
			return nil, usageError(err)
		}
		for _, sk := range reg.Skipped() {
			log.Warn("reflect: a service is left out: the backend gives no usable descriptors for it",
				"backend", backendName(b), "service", sk.Name, "reason", sk.Reason, "error", sk.Err)
		}
		parts = append(parts, bridgereflect.Part{Name: backendName(b), Conn: conn, Registry: reg})
	}
	cat, err := bridgereflect.Merge(parts)
	if err != nil {
		return nil, failure(err)
	}
	return cat.Methods(), nil
}

// loadDescriptors reads the protoset or compiles the .proto files of s,
// keeping the services its one backend (if configured) serves.
func loadDescriptors(ctx context.Context, s config.Settings) (*bridgereflect.Registry, error) {
	d := s.Descriptors
	var reg *bridgereflect.Registry
	var err error
	if d.Protoset != "" {
		reg, err = bridgereflect.ReadProtoset(d.Protoset)
	} else {
		reg, err = bridgereflect.CompileProtos(ctx, d.ImportPath, d.Proto)
	}
	if err != nil {
		return nil, err
	}
	if backends := s.BackendList(); len(backends) == 1 {
		return reg.Filter(backends[0].Include, backends[0].Exclude)
	}
	return reg, nil
}

// documentInfo is the info and servers of the OpenRPC document of s,
// served at addr (HOST:PORT) when no servers are configured.
func documentInfo(s config.Settings, addr string) mapping.DocumentInfo {
	info := mapping.DocumentInfo{Title: s.OpenRPC.Title, Version: s.OpenRPC.Version, Description: s.OpenRPC.Description}
	urls := s.OpenRPC.Servers
	if len(urls) == 0 {
		scheme := "http"
		if s.TLS.Enabled() {
			scheme = "https"
		}
		urls = []string{scheme + "://" + addr + "/"}
	}
	for _, u := range urls {
		info.Servers = append(info.Servers, mapping.Server{URL: u})
	}
	return info
}

// dialableListen is a listen address as a client can reach it: an empty
// or unspecified host (":8080", "0.0.0.0:8080") becomes loopback.
func dialableListen(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

// readiness gives the details of /readyz: the discovery status of every
// backend or, when files describe the services, which files.
func readiness(s config.Settings, w *bridgereflect.Watcher, sources []bridgereflect.Source) func() any {
	if !s.Descriptors.Enabled() {
		return func() any {
			st := w.Status()
			out := readinessStatus{Backends: make([]backendReadiness, len(st.Backends)), LastError: st.LastError}
			for i, b := range st.Backends {
				out.Backends[i] = backendReadiness{BackendStatus: b, AddressesStatus: addresses(sources, b.Name)}
			}
			return out
		}
	}
	files := map[string]any{"protoset": s.Descriptors.Protoset}
	if s.Descriptors.Protoset == "" {
		files = map[string]any{"proto": s.Descriptors.Proto, "import_path": s.Descriptors.ImportPath}
	}
	return func() any {
		backends := make([]backendReadiness, len(sources))
		for i, src := range sources {
			backends[i] = backendReadiness{BackendStatus: bridgereflect.BackendStatus{Name: src.Name, State: "ready"},
				AddressesStatus: addresses(sources, src.Name)}
		}
		return map[string]any{"descriptors": files, "backends": backends}
	}
}

// readinessStatus is the watcher's status with each backend's addresses.
type readinessStatus struct {
	Backends  []backendReadiness `json:"backends"`
	LastError string             `json:"last_error,omitempty"`
}

type backendReadiness struct {
	bridgereflect.BackendStatus
	*backend.AddressesStatus
}

// addresses returns the addresses of the backend named name, nil when its
// connection tells none.
func addresses(sources []bridgereflect.Source, name string) *backend.AddressesStatus {
	for _, src := range sources {
		if c, ok := src.Conn.(*backend.Conn); ok && src.Name == name {
			st := c.Addresses()
			return &st
		}
	}
	return nil
}

// reloadDescriptors reads the descriptor files of s again and installs
// their services, reporting whether it did; on failure the services in
// use stay.
func reloadDescriptors(ctx context.Context, s config.Settings, srv *bridge.Server, log *slog.Logger) bool {
	reg, err := loadDescriptors(ctx, s)
	if err != nil {
		log.Error("cannot reload the descriptor files; keeping the services in use", "error", err)
		return false
	}
	srv.Update(reg)
	log.Info("reloaded the descriptor files", "methods", len(reg.Methods()))
	return true
}
