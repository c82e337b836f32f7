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

// A phase of a small proxy runs more batch lanes than the run's: "/60"
// gives phase 1 its own 60, phase 2 runs Params.Workers.
func ExampleParams_PhaseWorkers() {
	phases, err := selection.ParseSchedule("1:1:2@0.3/60,3:12:16")
	if err != nil {
		fmt.Println(err)
		return
	}
	p := selection.Params{PoolSize: 1000, Budget: 200, Bootstrap: 50, BatchSize: 4, Workers: 16, Schedule: phases}
	if err := p.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	for i := range p.Schedule {
		fmt.Printf("phase %d: %d lanes\n", i+1, p.PhaseWorkers(i))
	}
	fmt.Println(selection.FormatSchedule(p.Schedule))
	// Output:
	// phase 1: 60 lanes
	// phase 2: 16 lanes
	// 1:1:2@0.3/60,3:12:16@1
}

// A phase of a small proxy cuts its candidates into batches of its own
// size: "/60x16" runs phase 1 on 60 lanes of 16 candidates a batch, and
// "/x8" phase 2 on the run's lanes in batches of 8; the schedule
// formats back the same.
func ExampleParams_PhaseBatchSize() {
	phases, err := selection.ParseSchedule("1:1:2@0.3/60x16,3:12:16/x8")
	if err != nil {
		fmt.Println(err)
		return
	}
	p := selection.Params{PoolSize: 1000, Budget: 200, Bootstrap: 50, BatchSize: 4, Workers: 16, Schedule: phases}
	if err := p.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	for i := range p.Schedule {
		fmt.Printf("phase %d: batches of %d on %d lanes\n", i+1, p.PhaseBatchSize(i), p.PhaseWorkers(i))
	}
	fmt.Println(selection.FormatSchedule(p.Schedule))
	// Output:
	// phase 1: batches of 16 on 60 lanes
	// phase 2: batches of 8 on 16 lanes
	// 1:1:2@0.3/60x16,3:12:16@1/x8
}
