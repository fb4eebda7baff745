package bridge_test

import (
	"flag"
	"runtime"
	"strconv"
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/binary"
)

// TestMain runs the package's parallel tests two at a time per CPU
// unless -parallel says otherwise (go test's default is one per CPU).
// They spend most of their time waiting on the bridge's timeouts and on
// sockets, not computing: on 2 CPUs under -race the package used under a
// third of the CPU time its wall time offered. The tests that measure
// time, memory or CPU, or check for leaked goroutines, do not call
// t.Parallel, so they still run alone, before the parallel ones.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0))); err != nil {
			panic(err)
		}
	}
	binary.Main(m) // removes the binaries the memory and MCP tests built
}
