package testserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// list lists the services of conn over the reflection service named
// (v1 and v1alpha share their messages' wire format), or returns the
// call's error.
func list(t *testing.T, conn *grpc.ClientConn, service string) ([]string, error) {
	t.Helper()
	st, err := conn.NewStream(t.Context(), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/"+service+"/ServerReflectionInfo")
	if err != nil {
		return nil, err
	}
	defer st.CloseSend()
	// A failed Send returns io.EOF; the status comes with Recv.
	_ = st.SendMsg(&grpc_reflection_v1.ServerReflectionRequest{MessageRequest: &grpc_reflection_v1.ServerReflectionRequest_ListServices{}})
	r := new(grpc_reflection_v1.ServerReflectionResponse)
	if err := st.RecvMsg(r); err != nil {
		return nil, err
	}
	var names []string
	for _, s := range r.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	slices.Sort(names)
	return names, nil
}

var every = []string{"demo.v1.Notes", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection",
	"helloworld.Greeter", "rpc.ops.Ops", "test.v1.TestService"}

// TestReflection: each Reflection offers its reflection services and no
// other, on bufconn and on loopback TCP; the default serves every test
// and demo service.
func TestReflection(t *testing.T) {
	for _, addr := range []string{"", testserver.Loopback} {
		for _, tt := range []struct {
			name        string
			mode        testserver.Reflection
			v1, v1alpha bool
			want        []string
		}{
			{"both", testserver.ReflectionBoth, true, true, every},
			{"v1", testserver.ReflectionV1, true, false, slices.DeleteFunc(slices.Clone(every), func(s string) bool { return s == "grpc.reflection.v1alpha.ServerReflection" })},
			{"v1alpha", testserver.ReflectionV1Alpha, false, true, slices.DeleteFunc(slices.Clone(every), func(s string) bool { return s == "grpc.reflection.v1.ServerReflection" })},
			{"none", testserver.ReflectionNone, false, false, nil},
		} {
			t.Run(tt.name+"/"+addr, func(t *testing.T) {
				b := testserver.Start(t, testserver.Options{Reflection: tt.mode, Addr: addr})
				for _, r := range []struct {
					name string
					on   bool
				}{{"grpc.reflection.v1.ServerReflection", tt.v1}, {"grpc.reflection.v1alpha.ServerReflection", tt.v1alpha}} {
					got, err := list(t, b.Conn(), r.name)
					switch {
					case r.on && err != nil:
						t.Errorf("%s: %v", r.name, err)
					case r.on && !slices.Equal(got, tt.want):
						t.Errorf("%s lists %q, want %q", r.name, got, tt.want)
					case !r.on && status.Code(err) != codes.Unimplemented:
						t.Errorf("%s: got %q, %v, want Unimplemented", r.name, got, err)
					}
				}
				if _, err := testv1.NewTestServiceClient(b.Conn()).Count(t.Context(), &testv1.CountRequest{Key: "k"}); err != nil {
					t.Fatal(err)
				}
				if n := b.Test().Calls("k"); n != 1 {
					t.Errorf("Test().Calls = %d, want 1", n)
				}
			})
		}
	}
}

// TestRestart: a TCP backend stopped and served again on its address,
// with other services, is reached by the same connection; its Test is new.
func TestRestart(t *testing.T) {
	b := testserver.Start(t, testserver.Options{Addr: testserver.Loopback})
	addr, first := b.Addr(), b.Test()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	greet := func() error {
		_, err := helloworld.NewGreeterClient(b.Conn()).SayHello(ctx, &helloworld.HelloRequest{Name: "a"}, grpc.WaitForReady(true))
		return err
	}
	if err := greet(); err != nil {
		t.Fatal(err)
	}
	b.Stop()
	if err := b.Conn().Invoke(t.Context(), "/helloworld.Greeter/SayHello", new(helloworld.HelloRequest), new(helloworld.HelloReply)); status.Code(err) != codes.Unavailable {
		t.Errorf("stopped: got %v, want Unavailable", err)
	}
	b.Restart()
	if b.Addr() != addr || b.Test() == first || b.Test() == nil {
		t.Errorf("restarted on %s with Test %p, want %s and a new Test (was %p)", b.Addr(), b.Test(), addr, first)
	}
	if err := greet(); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	b.Restart(testserver.Test(testv1.NewServer()))
	// A call may still meet the stopped server's connection: Unavailable.
	var err error
	await.Until(t, 10*time.Second, "a call past the stopped server's connection", func() bool {
		err = greet()
		return status.Code(err) != codes.Unavailable
	})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("restarted without Greeter: got %v, want Unimplemented", err)
	}
	if b.Test() != nil {
		t.Errorf("Test() with explicit services = %p, want nil", b.Test())
	}
}

// TestTLS: with TLS the server speaks TLS only; Dial's credentials
// replace the insecure default.
func TestTLS(t *testing.T) {
	cert := selfSigned(t)
	roots := x509.NewCertPool()
	roots.AddCert(cert.Leaf)
	b := testserver.Start(t, testserver.Options{Addr: testserver.Loopback, Services: []testserver.Service{testserver.Greeter},
		TLS:  &tls.Config{Certificates: []tls.Certificate{cert}},
		Dial: []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: "localhost"}))}})
	if r, err := helloworld.NewGreeterClient(b.Conn()).SayHello(t.Context(), &helloworld.HelloRequest{Name: "tls"}); err != nil || r.GetMessage() != "Hello, tls!" {
		t.Fatalf("over TLS: %v, %v", r, err)
	}
	plain := testserver.Start(t, testserver.Options{Addr: testserver.Loopback, NoConn: true})
	if plain.Conn() != nil {
		t.Error("NoConn: got a connection")
	}
	// A plaintext client of the TLS backend fails.
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 9)
	if n, _ := c.Read(buf); n == 9 && buf[3] == 4 { // a SETTINGS frame
		t.Error("the TLS backend answered HTTP/2 in plaintext")
	}
}

// TestListener: a given listener is served, and Restart refuses it.
func TestListener(t *testing.T) {
	lis, err := net.Listen("tcp", testserver.Loopback)
	if err != nil {
		t.Fatal(err)
	}
	b := testserver.Start(t, testserver.Options{Listener: lis, Services: []testserver.Service{testserver.Echo}, Reflection: testserver.ReflectionNone})
	if b.Addr() != lis.Addr().String() {
		t.Errorf("Addr = %s, want %s", b.Addr(), lis.Addr())
	}
	if _, err := helloworld.NewGreeterClient(b.Conn()).SayHello(t.Context(), &helloworld.HelloRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("Greeter on an Echo-only backend: got %v, want Unimplemented", err)
	}
}

// selfSigned is a certificate for localhost and 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}
