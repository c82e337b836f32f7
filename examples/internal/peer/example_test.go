package peer_test

import (
	"fmt"

	"github.com/selectformer/selectformer/examples/internal/peer"
)

func ExampleParseSchedule() {
	phases, err := peer.ParseSchedule("1:4:8@0.3,2:4:16")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range phases {
		fmt.Printf("%d layers, %d heads, MLP width %d, keep %g\n", p.Layers, p.Heads, p.Hidden, p.Keep)
	}
	_, err = peer.ParseSchedule("1:4:8,2:4:16")
	fmt.Println(peer.Code(peer.Usage("%v", err)))
	// Output:
	// 1 layers, 4 heads, MLP width 8, keep 0.3
	// 2 layers, 4 heads, MLP width 16, keep 1
	// 2
}
