package selection_test

import (
	"fmt"

	"github.com/selectformer/selectformer/selection"
)

func ExampleParseSchedule() {
	phases, err := selection.ParseSchedule("1:4:8@0.3,2:4:16")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range phases {
		fmt.Printf("%d layers, %d heads, MLP width %d, keep %g\n", p.Proxy.Layers, p.Proxy.Heads, p.Proxy.MLPHidden, p.Keep)
	}
	_, err = selection.ParseSchedule("1:4:8,2:4:16")
	fmt.Println(err)
	// Output:
	// 1 layers, 4 heads, MLP width 8, keep 0.3
	// 2 layers, 4 heads, MLP width 16, keep 1
	// selection: schedule: phase 1 "1:4:8": needs @keep (the fraction of candidates that survive it)
}
