// Command herald runs the herald notification service and its tools.
//
//	herald serve [--roles ingest,relay,dispatch]   run the service
//	herald migrate                                  apply database migrations
//	herald apikey create --name NAME [--scopes S,S] create an API client, print its key and webhook secret
//	herald apikey list                              list API clients (never their keys or secrets)
//	herald apikey revoke ID                         revoke an API client
//	herald apikey rotate-webhook-secret ID          new webhook signing secret; the previous one stays valid 24h
//	herald sim                                      run the provider simulator
//	herald trace ID | --client C KEY                a notification's timeline from the database
//	herald redrive --status FAILED [filters]        send failed deliveries again (dry-run count, then confirm)
//	herald version                                  print the version stamped at build time
//
// Every flag has a HERALD_* environment variable; see docs/configuration.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	// Time-zone data in the binary: quiet hours need every IANA zone, and the container image
	// (FROM scratch) has no /usr/share/zoneinfo. The system's data wins where there is one.
	_ "time/tzdata"
)

var commands = map[string]func(ctx context.Context, args []string) error{
	"serve":   runServe,
	"migrate": runMigrate,
	"apikey":  runAPIKey,
	"sim":     runSim,
	"trace":   runTrace,
	"redrive": runRedrive,
	"version": runVersion,
}

func main() {
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: herald serve|migrate|apikey|sim|trace|redrive|version [flags]  (herald CMD -h for flags)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := commands[os.Args[1]](ctx, os.Args[2:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "herald:", err)
		os.Exit(1)
	}
}

// runVersion prints the version set at build time (-ldflags "-X main.version=...").
func runVersion(_ context.Context, args []string) error {
	if err := newFlags("version").Parse(args); err != nil {
		return err
	}
	fmt.Println("herald", version)
	return nil
}
