// Package fleet starts, for tests, the pods of one scaled gRPC backend:
// greeter servers on distinct loopback addresses (127.0.0.2 to 127.0.0.9)
// sharing one port, each answering helloworld.Greeter/SayHello with its
// own address, serving test.v1.TestService (its streams) too, with the
// health service and server reflection, and an in-process DNS server
// (github.com/miekg/dns) whose records the test changes, as a headless
// Service's would. Pods can be slowed, made to fail every call with a
// status, stopped gracefully (GOAWAY, then stop) or killed (their
// connections closed with no GOAWAY, as when the process dies). Pods may
// also run as processes of their own (StartProcesses), to be frozen
// (SIGSTOP) as a stalled pod is.
//
// It imports only gRPC, miekg/dns and the generated test services.
package fleet

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

// Name is the DNS name of the fleet's pods.
const Name = "pods.fleet.test"

// A Fleet is the pods of one backend and its DNS server.
type Fleet struct {
	t    testing.TB
	Port int // every pod's port

	mu      sync.Mutex
	pods    map[string]*Pod // by IP
	dns     *dns.Server
	dnsAddr string
	records []string // the IPs DNS answers with
	procs   bool     // the pods are processes
}

// A Pod is one server of the fleet.
type Pod struct {
	IP     string
	Addr   string // IP:port
	srv    *grpc.Server
	lis    *listener
	Health *health.Server
	delay  atomic.Int64 // added to each call, in nanoseconds
	fail   atomic.Uint32
	calls  atomic.Int64
	done   chan struct{}
	proc   *process // a pod of StartProcesses
}

// Start starts n pods on 127.0.0.2 and up, all in DNS, and the DNS
// server; everything stops when the test ends.
func Start(t testing.TB, n int) *Fleet {
	t.Helper()
	return start(&Fleet{t: t, pods: map[string]*Pod{}}, n)
}

func start(f *Fleet, n int) *Fleet {
	t := f.t
	t.Helper()
	f.startDNS()
	for attempt := 0; ; attempt++ {
		lis, err := net.Listen("tcp", "127.0.0.2:0")
		if err != nil {
			t.Fatal(err)
		}
		f.Port = lis.Addr().(*net.TCPAddr).Port
		lis.Close()
		ok := true
		for i := range n {
			if _, err := f.start(IP(i)); err != nil {
				ok = false
				break
			}
		}
		if ok {
			break
		}
		f.stopPods()
		if attempt == 5 {
			t.Fatal("no port free on every loopback address")
		}
	}
	ips := make([]string, n)
	for i := range ips {
		ips[i] = IP(i)
	}
	f.SetRecords(ips...)
	t.Cleanup(f.StopAll)
	return f
}

// IP is the address of pod i: 127.0.0.(i+2).
func IP(i int) string { return "127.0.0." + strconv.Itoa(i+2) }

// Target is the bridge's address of the fleet, asking its DNS server.
func (f *Fleet) Target() string {
	return fmt.Sprintf("dns://%s/%s:%d", f.dnsAddr, Name, f.Port)
}

// Addr is the address of the pod at ip.
func (f *Fleet) Addr(ip string) string { return net.JoinHostPort(ip, strconv.Itoa(f.Port)) }

// StartPod starts a pod at ip (not in DNS until Add).
func (f *Fleet) StartPod(ip string) *Pod {
	f.t.Helper()
	p, err := f.start(ip)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *Fleet) start(ip string) (*Pod, error) {
	if f.procs {
		return f.startProcess(ip)
	}
	p, err := servePod(f.Addr(ip))
	if err != nil {
		return nil, err
	}
	p.IP = ip
	f.mu.Lock()
	f.pods[ip] = p
	f.mu.Unlock()
	return p, nil
}

// servePod serves a pod at addr.
func servePod(addr string) (*Pod, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Pod{Addr: addr, lis: &listener{Listener: lis, conns: map[net.Conn]bool{}},
		Health: health.NewServer(), done: make(chan struct{})}
	p.srv = grpc.NewServer(grpc.ChainUnaryInterceptor(p.unary), grpc.ChainStreamInterceptor(p.stream))
	helloworld.RegisterGreeterServer(p.srv, greeter{p: p})
	testv1.RegisterTestServiceServer(p.srv, testv1.NewServer())
	healthpb.RegisterHealthServer(p.srv, p.Health)
	reflection.Register(p.srv)
	go func() {
		defer close(p.done)
		p.srv.Serve(p.lis)
	}()
	return p, nil
}

// counted reports whether the calls of method count as the pod's calls
// (Calls), and fail with SetFail: the application's, not the health
// service's or reflection's.
func counted(method string) bool {
	return !strings.HasPrefix(method, "/grpc.health.") && !strings.HasPrefix(method, "/grpc.reflection.")
}

func (p *Pod) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if counted(info.FullMethod) {
		p.calls.Add(1)
		if code := p.fail.Load(); code != 0 {
			return nil, status.Error(codes.Code(code), "the pod fails every call")
		}
	}
	return handler(ctx, req)
}

func (p *Pod) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if counted(info.FullMethod) {
		p.calls.Add(1)
		if code := p.fail.Load(); code != 0 {
			return status.Error(codes.Code(code), "the pod fails every call")
		}
	}
	return handler(srv, ss)
}

// Pod returns the pod at ip.
func (f *Fleet) Pod(ip string) *Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pods[ip]
}

// SetRecords makes DNS answer with ips (none: no record).
func (f *Fleet) SetRecords(ips ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records = slices.Clone(ips)
}

// Add adds ip to the records, Remove removes it.
func (f *Fleet) Add(ip string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records = append(f.records, ip)
}

func (f *Fleet) Remove(ip string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records = slices.DeleteFunc(f.records, func(s string) bool { return s == ip })
}

// StopDNS stops the DNS server: it answers nothing any more.
func (f *Fleet) StopDNS() {
	f.mu.Lock()
	s := f.dns
	f.dns = nil
	f.mu.Unlock()
	if s != nil {
		s.Shutdown()
	}
}

// SetDelay adds d to every call the pod answers.
func (p *Pod) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// SetFail makes the pod answer every call and stream at once with code
// (not the health service nor reflection); codes.OK heals it.
func (p *Pod) SetFail(code codes.Code) { p.fail.Store(uint32(code)) }

// Calls returns the calls and streams the pod took (not a process pod's).
func (p *Pod) Calls() int64 { return p.calls.Load() }

// SetServing sets the health of the whole server.
func (p *Pod) SetServing(on bool) {
	st := healthpb.HealthCheckResponse_SERVING
	if !on {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	p.Health.SetServingStatus("", st)
}

// GracefulStop sends GOAWAY, waits for the calls in flight, and stops
// (not a process pod).
func (p *Pod) GracefulStop() {
	p.srv.GracefulStop()
	<-p.done
}

// Kill closes the pod's listener and every connection at once, with no
// GOAWAY, as when its process dies (a process pod's process is killed).
func (p *Pod) Kill() {
	if p.proc != nil {
		p.proc.kill()
		return
	}
	p.lis.kill()
	p.srv.Stop()
	<-p.done
}

// StopAll stops every pod and the DNS server.
func (f *Fleet) StopAll() {
	f.StopDNS()
	f.stopPods()
}

func (f *Fleet) stopPods() {
	f.mu.Lock()
	pods := f.pods
	f.pods = map[string]*Pod{}
	f.mu.Unlock()
	for _, p := range pods {
		if p.proc != nil {
			p.proc.kill()
			continue
		}
		p.srv.Stop()
		<-p.done
	}
}

func (f *Fleet) startDNS() {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	f.dnsAddr = pc.LocalAddr().String()
	started := make(chan struct{})
	s := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(f.answer), NotifyStartedFunc: func() { close(started) }}
	f.dns = s
	go s.ActivateAndServe()
	<-started
}

// answer answers A queries for Name with the records; AAAA with none.
func (f *Fleet) answer(w dns.ResponseWriter, q *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	f.mu.Lock()
	records := slices.Clone(f.records)
	f.mu.Unlock()
	for _, question := range q.Question {
		if question.Name != dns.Fqdn(Name) {
			m.Rcode = dns.RcodeNameError
			continue
		}
		if question.Qtype != dns.TypeA {
			continue
		}
		for _, ip := range records {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: question.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1},
				A: net.ParseIP(ip)})
		}
	}
	w.WriteMsg(m)
}

// greeter answers SayHello with its pod's address.
type greeter struct {
	helloworld.UnimplementedGreeterServer
	p *Pod
}

func (g greeter) SayHello(ctx context.Context, _ *helloworld.HelloRequest) (*helloworld.HelloReply, error) {
	if d := time.Duration(g.p.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	return &helloworld.HelloReply{Message: g.p.Addr}, nil
}

// listener tracks its connections, to close them all at once.
type listener struct {
	net.Listener
	mu    sync.Mutex
	conns map[net.Conn]bool
	dead  bool
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead {
		c.Close()
		return nil, net.ErrClosed
	}
	l.conns[c] = true
	return c, nil
}

func (l *listener) kill() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dead = true
	l.Listener.Close()
	for c := range l.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, as the kernel sends for a dead process
		}
		c.Close()
	}
}
