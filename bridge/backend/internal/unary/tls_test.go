package unary

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// selfSigned makes a certificate for localhost and 127.0.0.1, and a pool
// that trusts it.
func selfSigned(t testing.TB) (*x509.CertPool, tls.Certificate) {
	return issueCert(t, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
}

// certFor makes a certificate for the DNS names alone, and a pool that
// trusts it.
func certFor(t testing.TB, names ...string) (*x509.CertPool, tls.Certificate) {
	return issueCert(t, names, nil)
}

// issueCert makes a self-signed certificate for names (the first is its
// common name) and ips, and a pool that trusts it.
func issueCert(t testing.TB, names []string, ips []net.IP) (*x509.CertPool, tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: names[0]},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              names,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return pool, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func tlsCreds(pool *x509.CertPool) credentials.TransportCredentials {
	return credentials.NewTLS(&tls.Config{RootCAs: pool})
}

// TestTLS calls a backend over TLS, by IP address and by name, and fails
// to when the backend's certificate is not trusted.
func TestTLS(t *testing.T) {
	t.Parallel()
	pool, cert := selfSigned(t)
	otherPool, _ := selfSigned(t)
	lis, addr := listen(t, "tcp")
	serve(t, lis, nil, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	_, port, _ := net.SplitHostPort(addr)

	tests := []struct {
		name   string
		target string
		pool   *x509.CertPool
		code   codes.Code
	}{
		{"by address", addr, pool, codes.OK},
		{"by name", "localhost:" + port, pool, codes.OK},
		{"untrusted", addr, otherPool, codes.Unavailable},
		{"no roots", addr, x509.NewCertPool(), codes.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, tt.target, Options{Creds: tlsCreds(tt.pool), DialTimeout: 5 * time.Second})
			start := time.Now()
			call, err := invoke(t.Context(), c, mEcho, []byte("secret"))
			wantCode(t, err, tt.code)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("the call took %v", d)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "certificate") {
					t.Errorf("error %v does not say why", err)
				}
				return
			}
			if string(call.Response) != "secret" {
				t.Fatalf("response %q", call.Response)
			}
			// Large messages both ways, at once, through TLS records.
			var wg sync.WaitGroup
			for i := range 4 {
				wg.Go(func() {
					call, err := invoke(t.Context(), c, mSize, []byte(strconv.Itoa(3<<20+i)))
					if err != nil || !bytes.Equal(call.Response, pattern(3<<20+i)) {
						t.Errorf("a large response: %v", err)
					}
					req := pattern(2<<20 + i)
					call, err = invoke(t.Context(), c, mEcho, req)
					if err != nil || !bytes.Equal(call.Response, req) {
						t.Errorf("a large request: %v", err)
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestTLSGracefulStop drains a TLS backend: the client closes the
// connection once idle, which writes a close_notify.
func TestTLSGracefulStop(t *testing.T) {
	t.Parallel()
	pool, cert := selfSigned(t)
	lis, addr := listen(t, "tcp")
	var started atomic.Int32 // calls of mSleep the backend has begun
	h := func(ctx context.Context, method string, req []byte, ss grpc.ServerStream) ([]byte, error) {
		if method == mSleep {
			started.Add(1)
		}
		return router(ctx, method, req, ss)
	}
	srv := serve(t, lis, h, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	c := newClient(t, addr, Options{Creds: tlsCreds(pool)})
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			call, err := invoke(t.Context(), c, mSleep, []byte("200ms"))
			if err != nil || string(call.Response) != "slept" {
				t.Errorf("%q, %v", call.Response, err)
			}
		})
	}
	await.Until(t, 5*time.Second, "the 5 calls to reach the backend", func() bool { return started.Load() == 5 })
	within(t, 5*time.Second, "GracefulStop", srv.GracefulStop)
	wg.Wait()
	serve(t, relisten(t, addr), nil, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	await.NoError(t, 5*time.Second, "a call to the new backend", func() error {
		_, err := invoke(t.Context(), c, mEcho, nil)
		return err
	})
}
