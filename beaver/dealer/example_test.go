package dealer_test

import (
	"fmt"

	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/transport"
)

// A networked dealer listens with the receive limits of its connections
// (small stream windows, a stream count), so that what a party makes it
// buffer is bounded per connection.
func ExampleServer_ConnOptions() {
	srv, err := dealer.NewServer(dealer.ServerOptions{})
	if err != nil {
		panic(err)
	}
	// Then ln, err := transport.Listen(":7101", id, opt), and
	// srv.Serve(ctx, conn, 1) for each connection accepted on it.
	opt := srv.ConnOptions(transport.Options{}) // keeps a link profile or a log set here
	fmt.Println(opt.StreamWindow, opt.MaxStreams)
	fmt.Printf("%.1f MiB per connection\n", float64(srv.ConnBufferBound())/(1<<20))
	// Output:
	// 65536 257
	// 40.2 MiB per connection
}
