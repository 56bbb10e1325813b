// Command refund is Gatehouse embedded in a program of its own: the desk,
// the API and the workers of `gatehouse serve`, serving a custom workflow
// (refund, in workflow.go) whose gate has a custom kind (refund) that the
// policy file policy.yaml governs.
//
// Run it from the repository's root, with the settings of `make run`:
//
//	go run ./examples/refund
//
// DATABASE_URL names the database; when it is unset, the program starts
// the private cluster of scripts/pg.sh as make run does. Every other
// setting of `gatehouse serve --help` applies; GATEHOUSE_POLICY_FILE
// defaults to examples/refund/policy.yaml.
//
// It imports the public API only (the root package and graph).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/gatehousehq/gatehouse"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "refund:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	getenv, err := withDefaults(getenv)
	if err != nil {
		return err
	}
	cfg, err := gatehouse.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	// The built-in workflows stay; refund is served beside them. A graph
	// that does not compile is an error of New, naming it.
	srv, err := gatehouse.New(cfg, gatehouse.WithGraph(refundWorkflow()))
	if err != nil {
		return err
	}
	// Run returns when ctx ends (Ctrl-C, SIGTERM), after a graceful
	// shutdown.
	return srv.Run(ctx)
}
