// Command echoserver is the bare grpc-go baseline of the benchmarks that
// load a daemon, in a process of its own, so that its memory can be
// measured as the daemon's is: e2e.EchoServer on 127.0.0.1, a free port,
// whose address it prints on stdout once it listens. It serves until it
// is killed.
package main

import (
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"

	"github.com/tinyhost/tinyhost/host/hostv1"
	"github.com/tinyhost/tinyhost/internal/e2e"
)

func main() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := grpc.NewServer()
	hostv1.RegisterHostServiceServer(s, e2e.EchoServer{})
	fmt.Println(lis.Addr().String())
	if err := s.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
