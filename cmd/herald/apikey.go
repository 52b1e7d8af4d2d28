package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/heraldhq/herald/ingest"
)

func runAPIKey(ctx context.Context, args []string) error {
	if len(args) == 0 || (args[0] != "create" && args[0] != "revoke") {
		return errors.New("usage: herald apikey create --name NAME | herald apikey revoke --id ID")
	}
	var c commonConfig
	var name, id string
	f := newFlags("apikey " + args[0])
	c.register(f)
	if args[0] == "create" {
		f.StringVar(&name, "name", "", "name of the API client")
	} else {
		f.StringVar(&id, "id", "", "id of the API client to revoke")
	}
	if err := f.Parse(args[1:]); err != nil {
		return err
	}
	pool, err := openPool(ctx, c)
	if err != nil {
		return err
	}
	defer pool.Close()

	if args[0] == "revoke" {
		if id == "" {
			return errors.New("apikey revoke: --id is required")
		}
		if err := ingest.RevokeAPIClient(ctx, pool, id); err != nil {
			return err
		}
		fmt.Printf("revoked API client %s\n", id)
		return nil
	}
	if name == "" {
		return errors.New("apikey create: --name is required")
	}
	clientID, key, err := ingest.CreateAPIClient(ctx, pool, name)
	if err != nil {
		return err
	}
	fmt.Printf("client id: %s\napi key:   %s\n(the key is shown once; only its hash is stored)\n", clientID, key)
	return nil
}
