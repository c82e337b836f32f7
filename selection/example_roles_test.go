package selection_test

import (
	"context"
	"log"
	"log/slog"

	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/transport"
)

// schedule is the public part both hosts configure alike.
var schedule = selection.Params{
	PoolSize: 5000, Budget: 500, Bootstrap: 100, BatchSize: 64, Workers: 4,
	Schedule: []selection.Phase{
		{Proxy: proxy.Shape{Layers: 1, Heads: 2, MLPHidden: 2}, Keep: 0.3},
		{Proxy: proxy.Shape{Layers: 2, Heads: 4, MLPHidden: 16}}, // keeps Budget − Bootstrap
	},
	Appraisal: selection.AppraiseThreshold,
}

// The model owner's host: it listens for the data owner, connects to the
// dealer, generates the proxies from its target after the bootstrap and
// keeps a checkpoint (rerun the same program after a crash to resume).
func ExampleModelOwner_Run() {
	ctx := context.Background()
	id, err := transport.LoadIdentity("mo.crt", "mo.key")
	if err != nil {
		log.Fatal(err)
	}
	target, err := model.Load("target-checkpoint", model.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	dealerConn, err := transport.Dial(ctx, "dealer.example:7000", id, "<dealer fingerprint>", transport.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer dealerConn.Close()
	prov, err := dealer.Connect(ctx, dealerConn, 0)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := transport.Listen(":7001", id, transport.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	conn, err := ln.Accept(ctx, "<data owner fingerprint>")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	mo := &selection.ModelOwner{
		Params: schedule,
		Target: target,
		Generate: proxy.Config{Tune: proxy.TrainConfig{Epochs: 2, BatchSize: 16, LR: 1e-4},
			InVivo: proxy.TrainConfig{Epochs: 2, BatchSize: 16, LR: 5e-5}, Seed: 1},
		Label: func(ctx context.Context, idx []int, in model.Input) ([]int, error) {
			return labelByHand(idx, in) // the model owner's annotators
		},
		Threshold: 0.4,
		StateDir:  "state-model-owner",
		Logger:    slog.Default(),
	}
	res, err := mo.Run(ctx, conn, prov)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("buy %d points (+%d bootstrap); worth it: %v", len(res.Selected), len(res.Bootstrap), res.Appraisal.Exceeds)
}

// The data owner's host: it dials the model owner, embeds its pool with the
// public pretrained checkpoint and shares it.
func ExampleDataOwner_Run() {
	ctx := context.Background()
	id, err := transport.LoadIdentity("do.crt", "do.key")
	if err != nil {
		log.Fatal(err)
	}
	emb, err := model.Load("public-pretrained-checkpoint", model.LoadOptions{NewHead: true})
	if err != nil {
		log.Fatal(err)
	}
	pool := loadPool() // model.Input: token ids padded to one length, or normalised images
	dealerConn, err := transport.Dial(ctx, "dealer.example:7000", id, "<dealer fingerprint>", transport.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer dealerConn.Close()
	prov, err := dealer.Connect(ctx, dealerConn, 1)
	if err != nil {
		log.Fatal(err)
	}
	conn, err := transport.Dial(ctx, "model-owner.example:7001", id, "<model owner fingerprint>", transport.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	do := &selection.DataOwner{Params: schedule, Pool: pool, Embedding: emb, StateDir: "state-data-owner",
		OnProgress: func(p selection.Progress) {
			log.Printf("phase %d: %d/%d batches, ETA %v", p.Phase, p.Done, p.Total, p.ETA)
		}}
	res, err := do.Run(ctx, conn, prov)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("sell points %v", res.Selected)
}

func labelByHand(idx []int, in model.Input) ([]int, error) { return make([]int, len(idx)), nil }

func loadPool() model.Input { return model.Input{} }
