package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/heraldhq/herald/internal/redrive"
)

// herald redrive talks to the API (POST and GET /api/redrives), not to the database as herald
// trace does: a re-drive writes, so it goes through the same checks, the --redrive-max bound,
// the Idempotency-Key and the audit (the API client the key belongs to) as any other caller,
// and needs an operator key rather than the database's credentials.

// redriveConfig is the flags of herald redrive.
type redriveConfig struct {
	APIURL, APIKey                         string
	Statuses                               []string
	Channel, Provider, ErrorClass, Code    string
	Template, Campaign, From, To, ExpireAt string
	IncludePermanent, Yes, Wait            bool
	PollInterval                           time.Duration
}

func (c *redriveConfig) register(f *envFlags) {
	f.String(&c.APIURL, "api-url", "http://127.0.0.1:8080", "base URL of herald's API")
	f.secret(&c.APIKey, "api-key", "an API key with the operator scope")
	f.Strings(&c.Statuses, "status", nil, "statuses to re-drive: FAILED, EXPIRED (default both, which needs --from or --to)")
	f.String(&c.Channel, "channel", "", "only this channel: PUSH, EMAIL, SMS, WEBHOOK")
	f.String(&c.Provider, "provider", "", "only deliveries whose last attempt went to this provider account (sms:twilio)")
	f.String(&c.ErrorClass, "error-class", "", "only this class of last attempt: TRANSIENT, PERMANENT, AMBIGUOUS, EXPIRED")
	f.String(&c.Code, "error-code", "", "only this provider code of the last attempt")
	f.String(&c.Template, "template", "", "only notifications of this template")
	f.String(&c.Campaign, "campaign", "", "only notifications of this campaign id")
	f.String(&c.From, "from", "", "only deliveries that reached their status at or after this RFC 3339 time")
	f.String(&c.To, "to", "", "only deliveries that reached their status before this RFC 3339 time")
	f.String(&c.ExpireAt, "expires-at", "", "new expiry (RFC 3339, in the future) of the re-driven deliveries; required with EXPIRED")
	f.Bool(&c.IncludePermanent, "include-permanent", false, "re-drive permanent failures too (bad number, invalid address)")
	f.Bool(&c.Yes, "yes", false, "do not ask for confirmation after the dry run")
	f.Bool(&c.Wait, "wait", true, "wait until the re-drive is DONE, printing its progress")
	f.Duration(&c.PollInterval, "poll-interval", time.Second, "how often --wait reads the re-drive")
}

// body is the POST body the flags describe.
func (c *redriveConfig) body(dryRun bool) map[string]any {
	filter := map[string]any{}
	if len(c.Statuses) > 0 {
		filter["status"] = c.Statuses
	}
	for k, v := range map[string]string{"channel": c.Channel, "provider": c.Provider, "errorClass": c.ErrorClass,
		"errorCode": c.Code, "template": c.Template, "campaignId": c.Campaign, "from": c.From, "to": c.To} {
		if v != "" {
			filter[k] = v
		}
	}
	b := map[string]any{"filter": filter, "dryRun": dryRun, "includePermanent": c.IncludePermanent}
	if c.ExpireAt != "" {
		b["expiresAt"] = c.ExpireAt
	}
	return b
}

func runRedrive(ctx context.Context, args []string) error {
	var c redriveConfig
	f := newFlags("redrive")
	c.register(f)
	if err := f.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return errors.New("usage: herald redrive --status FAILED [--channel C] [--from T] ... [--yes]")
	}
	if c.APIKey == "" {
		return errors.New("--api-key (HERALD_API_KEY): an API key with the operator scope is required")
	}
	cl := &apiClient{base: strings.TrimRight(c.APIURL, "/"), key: c.APIKey, http: &http.Client{Timeout: time.Minute}}
	return redriveFlow(ctx, &c, cl, os.Stdin, os.Stdout)
}

// redriveFlow runs the dry run, shows its count, asks (unless --yes), then runs the re-drive
// and, with --wait, follows it to DONE.
func redriveFlow(ctx context.Context, c *redriveConfig, cl *apiClient, in io.Reader, out io.Writer) error {
	var dry redrive.Answer
	if err := cl.post(ctx, "/api/redrives", c.body(true), &dry); err != nil {
		return fmt.Errorf("dry run: %w", err)
	}
	would := dry.Matched
	for _, n := range dry.Skipped {
		would -= n
	}
	fmt.Fprintf(out, "dry run %s: %d deliveries match, %d would be re-driven%s\n", dry.ID, dry.Matched, would, skippedText(dry.Skipped))
	if would == 0 {
		fmt.Fprintln(out, "nothing to re-drive")
		return nil
	}
	if !c.Yes {
		fmt.Fprintf(out, "re-drive %d deliveries? [y/N] ", would)
		line, err := bufio.NewReader(in).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read confirmation: %w", err)
		}
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(out, "not re-driven")
			return nil
		}
	}
	var ans redrive.Answer
	if err := cl.post(ctx, "/api/redrives", c.body(false), &ans); err != nil {
		return fmt.Errorf("re-drive: %w", err)
	}
	fmt.Fprintf(out, "re-drive %s %s: %d matched\n", ans.ID, ans.Status, ans.Matched)
	t := time.NewTicker(c.PollInterval)
	defer t.Stop()
	for c.Wait && ans.Status != redrive.StatusDone {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if err := cl.get(ctx, "/api/redrives/"+ans.ID, &ans); err != nil {
			return fmt.Errorf("follow re-drive %s: %w", ans.ID, err)
		}
		fmt.Fprintf(out, "re-drive %s %s: %d re-driven%s\n", ans.ID, ans.Status, ans.Redriven, skippedText(ans.Skipped))
	}
	return nil
}

func skippedText(skipped map[string]int64) string {
	if len(skipped) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(skipped)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, skipped[k]))
	}
	return ", skipped: " + strings.Join(parts, ", ")
}

// apiClient calls herald's API with an API key.
type apiClient struct {
	base, key string
	http      *http.Client
}

func (a *apiClient) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	key := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("idempotency key: %w", err)
	}
	return a.do(ctx, http.MethodPost, path, bytes.NewReader(b), "redrive-"+hex.EncodeToString(key), out)
}

func (a *apiClient) get(ctx context.Context, path string, out any) error {
	return a.do(ctx, http.MethodGet, path, nil, "", out)
}

func (a *apiClient) do(ctx context.Context, method, path string, body io.Reader, idem string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var p struct {
			Code, Detail string
			Errors       []struct{ Field, Message string }
		}
		_ = json.Unmarshal(b, &p)
		for _, e := range p.Errors {
			p.Detail += "; " + e.Field + ": " + e.Message
		}
		return fmt.Errorf("%s %s: %d %s: %s", method, path, resp.StatusCode, p.Code, p.Detail)
	}
	return json.Unmarshal(b, out)
}
