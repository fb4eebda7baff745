package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

// ca is a certificate authority made in the test.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its certificate, PEM
}

var serial atomic.Int64

func newCA(t *testing.T, dir, name string) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	c := &ca{cert: cert, key: key, file: filepath.Join(dir, name+".pem")}
	writePEM(t, c.file, "CERTIFICATE", der)
	return c
}

// issue makes a certificate for localhost and 127.0.0.1 signed by c and
// writes it and its key to dir/name.pem and dir/name-key.pem.
func (c *ca) issue(t *testing.T, dir, name string) (certFile, keyFile string, serialNumber int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serialNumber = serial.Add(1)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serialNumber), Subject: pkix.Name{CommonName: name},
		DNSNames: []string{"localhost", "backend.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile, serialNumber
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	// Write then rename, as a secret volume update does, so that readers
	// never see half a file.
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

func (c *ca) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.cert)
	return p
}

func loadPair(t *testing.T, certFile, keyFile string) tls.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// writeConfig writes a YAML configuration file and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bridge.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startBridge runs serve with args plus a loopback listener and JSON logs,
// and waits until it has discovered its backends. It returns the process
// and the listener's address.
func startBridge(t *testing.T, args ...string) (*process, string) {
	t.Helper()
	p := start(t, append(append([]string{"serve"}, args...), "--listen", "127.0.0.1:0", "--log-format", "json")...)
	var addr string
	p.stderr.until(t, "listening log", func(l string) bool {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "listening" {
			addr = rec.Addr
			return true
		}
		return false
	})
	p.stderr.until(t, "discovery log", func(l string) bool { return strings.Contains(l, "discovered the backends") })
	return p, addr
}

// rpc posts body to url with client and returns the decoded reply.
func rpc(t *testing.T, client *http.Client, url, body string, header http.Header) (int, map[string]any, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("reply %q: %v", b, err)
		}
	}
	return resp.StatusCode, m, resp.Header
}

// code is the error code of a reply, or 0 for a result.
func code(r map[string]any) int {
	if e, ok := r["error"].(map[string]any); ok {
		return int(e["code"].(float64))
	}
	return 0
}

func call(method string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{}}`
}

// dynamicBackend is a gRPC server whose one service, redeploy.v1.Svc,
// offers the methods it is told, with reflection describing exactly them.
// Method Slow blocks until release is closed.
type dynamicBackend struct {
	methods atomic.Pointer[[]string]
	files   atomic.Pointer[protoregistry.Files]
	release chan struct{}
	slow    chan struct{} // receives when a Slow call starts
}

func newDynamicBackend(t *testing.T, methods ...string) *dynamicBackend {
	d := &dynamicBackend{release: make(chan struct{}), slow: make(chan struct{}, 100)}
	d.set(t, methods...)
	return d
}

// set changes the methods offered, as a redeploy would.
func (d *dynamicBackend) set(t *testing.T, methods ...string) {
	t.Helper()
	svc := &descriptorpb.ServiceDescriptorProto{Name: proto.String("Svc")}
	for _, m := range methods {
		svc.Method = append(svc.Method, &descriptorpb.MethodDescriptorProto{
			Name: proto.String(m), InputType: proto.String(".google.protobuf.Empty"), OutputType: proto.String(".google.protobuf.Empty"),
		})
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("redeploy.proto"), Package: proto.String("redeploy.v1"), Syntax: proto.String("proto3"),
		Dependency: []string{"google/protobuf/empty.proto"}, Service: []*descriptorpb.ServiceDescriptorProto{svc},
	}, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	files := new(protoregistry.Files)
	for _, f := range []protoreflect.FileDescriptor{emptypb.File_google_protobuf_empty_proto, fd} {
		if err := files.RegisterFile(f); err != nil {
			t.Fatal(err)
		}
	}
	d.files.Store(files)
	d.methods.Store(&methods)
}

// reflected is what the reflection service of a dynamicBackend's server
// lists: its registered services and redeploy.v1.Svc.
type reflected struct {
	d *dynamicBackend
	s *grpc.Server
}

func (r reflected) GetServiceInfo() map[string]grpc.ServiceInfo {
	m := r.s.GetServiceInfo()
	m["redeploy.v1.Svc"] = grpc.ServiceInfo{}
	return m
}

func (r reflected) FindFileByPath(p string) (protoreflect.FileDescriptor, error) {
	if fd, err := r.d.files.Load().FindFileByPath(p); err == nil {
		return fd, nil
	}
	return protoregistry.GlobalFiles.FindFileByPath(p)
}

func (r reflected) FindDescriptorByName(n protoreflect.FullName) (protoreflect.Descriptor, error) {
	if d, err := r.d.files.Load().FindDescriptorByName(n); err == nil {
		return d, nil
	}
	return protoregistry.GlobalFiles.FindDescriptorByName(n)
}

// handle serves every method of redeploy.v1.Svc.
func (d *dynamicBackend) handle(_ any, stream grpc.ServerStream) error {
	full, _ := grpc.MethodFromServerStream(stream)
	method, ok := strings.CutPrefix(full, "/redeploy.v1.Svc/")
	if !ok || !contains(*d.methods.Load(), method) {
		return status.Errorf(codes.Unimplemented, "unknown method %s", full)
	}
	if err := stream.RecvMsg(new(emptypb.Empty)); err != nil {
		return err
	}
	if method == "Slow" {
		d.slow <- struct{}{}
		select {
		case <-d.release:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
	return stream.SendMsg(new(emptypb.Empty))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// serveOn serves d on addr until the returned stop is called or the test
// ends. extra registers more services.
func (d *dynamicBackend) serveOn(t *testing.T, addr string, extra ...func(*grpc.Server)) (stop func()) {
	t.Helper()
	return d.serveTLSOn(t, addr, nil, extra...)
}

// serveTLSOn is serveOn with TLS when cfg is not nil.
func (d *dynamicBackend) serveTLSOn(t *testing.T, addr string, cfg *tls.Config, extra ...func(*grpc.Server)) (stop func()) {
	t.Helper()
	var services []testserver.Service
	for _, r := range extra {
		services = append(services, r)
	}
	services = append(services, func(s *grpc.Server) {
		reflectionv1.RegisterServerReflectionServer(s, reflection.NewServerV1(reflection.ServerOptions{
			Services: reflected{d, s}, DescriptorResolver: reflected{d, s}, ExtensionResolver: protoregistry.GlobalTypes,
		}))
	})
	return testserver.Start(t, testserver.Options{Addr: addr, TLS: cfg, NoConn: true, Reflection: testserver.ReflectionNone,
		Server: []grpc.ServerOption{grpc.UnknownServiceHandler(d.handle)}, Services: services}).Stop
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}
