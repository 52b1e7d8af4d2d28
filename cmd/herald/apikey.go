package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/heraldhq/herald/internal/apikey"
)

const apikeyUsage = `usage:
  herald apikey create --name NAME [--scopes notifications:send,notifications:read]
  herald apikey list
  herald apikey revoke ID
  herald apikey rotate-webhook-secret ID [--previous-valid-for 24h]
  herald apikey rotate-webhook-secret ID --expire-previous
scopes: ` + "notifications:send notifications:read users:read users:write templates:write campaigns:write operator (every scope)"

// runAPIKey manages API clients: their keys, scopes and webhook signing secrets. Keys and
// secrets are printed once, by create and rotate-webhook-secret; list never shows them.
func runAPIKey(ctx context.Context, args []string) error {
	return apikeyCommand(ctx, args, os.Stdout)
}

func apikeyCommand(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New(apikeyUsage)
	}
	cmd := args[0]
	var c commonConfig
	var name, scopes, id string
	var window time.Duration
	var expirePrevious bool
	f := newFlags("apikey " + cmd)
	c.register(f)
	switch cmd {
	case "create":
		f.String(&name, "name", "", "name of the API client")
		f.String(&scopes, "scopes", apikey.JoinScopes(apikey.DefaultScopes()), "comma-separated scopes of the key (operator: every scope)")
	case "list":
	case "revoke":
		f.String(&id, "id", "", "id of the API client to revoke (or give it as the argument)")
	case "rotate-webhook-secret":
		f.Duration(&window, "previous-valid-for", apikey.DefaultRotationWindow, "how long webhooks stay signed with the previous secret too")
		f.Bool(&expirePrevious, "expire-previous", false, "end the current rotation window now instead: sign with the current secret only")
	default:
		return errors.New(apikeyUsage)
	}
	pos, err := parseInterleaved(f, args[1:])
	if err != nil {
		return err
	}
	if id == "" && len(pos) > 0 {
		id, pos = pos[0], pos[1:]
	}
	if len(pos) > 0 {
		return fmt.Errorf("apikey %s: unexpected argument %q", cmd, pos[0])
	}
	var parsed []apikey.Scope
	switch cmd {
	case "create":
		if name == "" {
			return errors.New("apikey create: --name is required")
		}
		if parsed, err = apikey.ParseScopes(scopes); err != nil {
			return fmt.Errorf("apikey create --scopes: %w", err)
		}
	case "revoke", "rotate-webhook-secret":
		if id == "" {
			return fmt.Errorf("apikey %s: the client id is required", cmd)
		}
	}
	pool, err := openPool(ctx, c, "herald-apikey")
	if err != nil {
		return err
	}
	defer pool.Close()

	switch cmd {
	case "create":
		nc, err := apikey.CreateAPIClient(ctx, pool, name, parsed)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "client id:      %s\napi key:        %s\nscopes:         %s\nwebhook secret: %s\n"+
			"(the key and the webhook secret are shown once; herald stores the key's hash only)\n",
			nc.ID, nc.Key, scopeList(nc.Scopes), nc.WebhookSecret)
	case "list":
		clients, err := apikey.ListAPIClients(ctx, pool)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tPREFIX\tSCOPES\tCREATED\tREVOKED")
		for _, cl := range clients {
			revoked := "-"
			if cl.RevokedAt != nil {
				revoked = cl.RevokedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cl.ID, cl.Name, cl.KeyPrefix, scopeList(cl.Scopes),
				cl.CreatedAt.UTC().Format(time.RFC3339), revoked)
		}
		return tw.Flush()
	case "revoke":
		if err := apikey.RevokeAPIClient(ctx, pool, id); err != nil {
			return err
		}
		fmt.Fprintf(out, "revoked API client %s\n", id)
	case "rotate-webhook-secret":
		if expirePrevious {
			if err := apikey.ExpirePreviousWebhookSecret(ctx, pool, id); err != nil {
				return err
			}
			fmt.Fprintf(out, "API client %s: webhooks are signed with the current secret only\n", id)
			return nil
		}
		secret, err := apikey.RotateWebhookSecret(ctx, pool, id, window)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "webhook secret: %s\n(shown once; webhooks carry signatures with the new and the previous secret until %s)\n",
			secret, time.Now().Add(window).UTC().Format(time.RFC3339))
	}
	return nil
}

// parseInterleaved parses flags that may come after positional arguments ("revoke ID
// --database-url U") and returns the positional ones.
func parseInterleaved(f *envFlags, args []string) ([]string, error) {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			return nil, err
		}
		if f.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, f.Arg(0))
		args = f.Args()[1:]
	}
}

func scopeList(scopes []apikey.Scope) string {
	if len(scopes) == 0 {
		return "-"
	}
	s := make([]string, len(scopes))
	for i, sc := range scopes {
		s[i] = string(sc)
	}
	return strings.Join(s, ",")
}
