package transport_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/selectformer/selectformer/transport"
)

// Two parties connect over TLS with pinned keys and exchange ring words on a
// stream; the stream's counters give the exact cost.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p0, err := transport.GenerateIdentity("model-owner")
	if err != nil {
		log.Fatal(err)
	}
	p1, err := transport.GenerateIdentity("data-owner")
	if err != nil {
		log.Fatal(err)
	}
	ln, err := transport.Listen("127.0.0.1:0", p0, transport.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	done := make(chan error, 1)
	go func() { // P1, the data owner, dials P0 and pins its key.
		c, err := transport.Dial(ctx, ln.Addr().String(), p1, p0.Fingerprint(), transport.Options{})
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		theirs := make([]uint64, 2)
		done <- c.Stream(1).Exchange(ctx, []uint64{10, 20}, theirs)
	}()

	c, err := ln.Accept(ctx, p1.Fingerprint()) // P0 pins P1's key.
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	theirs := make([]uint64, 2)
	if err := c.Stream(1).Exchange(ctx, []uint64{1, 2}, theirs); err != nil {
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Println("received", theirs)
	fmt.Println(c.Stream(1).Stats())
	// Output:
	// received [10 20]
	// sent 26 B in 1 msgs, received 26 B in 1 msgs, 1 rounds
}

// A link profile and its model of one transfer.
func ExampleProfileByName() {
	p, err := transport.ProfileByName("paper-wan")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p)
	fmt.Println("10 MB message:", p.TransferTime(10_000_000))
	// Output:
	// paper-wan (100 MB/s, 50ms one-way)
	// 10 MB message: 150ms
}

// Measuring one protocol step with snapshots.
func ExampleStats_Sub() {
	a, b := transport.Pipe(transport.Options{})
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	before := a.Stats()
	go func() { _ = b.Stream(0).RecvWords(ctx, make([]uint64, 4)) }()
	if err := a.Stream(0).SendWords(ctx, []uint64{1, 2, 3, 4}); err != nil {
		log.Fatal(err)
	}
	d := a.Stats().Sub(before)
	fmt.Println(d.BytesSent, "bytes (10 header + 32 payload),", d.Rounds, "round")
	// Output: 42 bytes (10 header + 32 payload), 1 round
}
