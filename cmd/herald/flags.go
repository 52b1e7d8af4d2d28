package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// envFlags registers flags whose default comes from a HERALD_* environment variable, so
// that every setting can be given either way (a flag wins over the variable).
type envFlags struct {
	*flag.FlagSet
	errs []error
}

func newFlags(name string) *envFlags {
	fs := flag.NewFlagSet("herald "+name, flag.ContinueOnError)
	return &envFlags{FlagSet: fs}
}

// envName maps a flag name to its variable: "kafka-brokers" → "HERALD_KAFKA_BROKERS".
func envName(flagName string) string {
	return "HERALD_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
}

func (f *envFlags) env(name string) (string, bool) {
	return os.LookupEnv(envName(name))
}

func (f *envFlags) usage(name, usage string) string {
	return fmt.Sprintf("%s (env %s)", usage, envName(name))
}

func (f *envFlags) String(p *string, name, def, usage string) {
	if v, ok := f.env(name); ok {
		def = v
	}
	f.StringVar(p, name, def, f.usage(name, usage))
}

func (f *envFlags) Strings(p *[]string, name string, def []string, usage string) {
	if v, ok := f.env(name); ok {
		def = splitList(v)
	}
	*p = def
	f.Func(name, f.usage(name, usage)+fmt.Sprintf(" (default %q)", strings.Join(def, ",")), func(s string) error {
		*p = splitList(s)
		return nil
	})
}

func (f *envFlags) Int(p *int, name string, def int, usage string) {
	if v, ok := f.env(name); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("%s: %w", envName(name), err))
		} else {
			def = n
		}
	}
	f.IntVar(p, name, def, f.usage(name, usage))
}

func (f *envFlags) Float(p *float64, name string, def float64, usage string) {
	if v, ok := f.env(name); ok {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("%s: %w", envName(name), err))
		} else {
			def = n
		}
	}
	f.Float64Var(p, name, def, f.usage(name, usage))
}

func (f *envFlags) Duration(p *time.Duration, name string, def time.Duration, usage string) {
	if v, ok := f.env(name); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("%s: %w", envName(name), err))
		} else {
			def = d
		}
	}
	f.DurationVar(p, name, def, f.usage(name, usage))
}

// Bool registers a boolean flag whose default comes from its HERALD_* variable ("true",
// "1", "false", ...).
func (f *envFlags) Bool(p *bool, name string, def bool, usage string) {
	if v, ok := f.env(name); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("%s: %w", envName(name), err))
		} else {
			def = b
		}
	}
	f.BoolVar(p, name, def, f.usage(name, usage))
}

// secret registers a string flag for a credential: like String, but its value (from the
// variable or the command line) is never printed, not even as the default in -h.
func (f *envFlags) secret(p *string, name, usage string) {
	if v, ok := f.env(name); ok {
		*p = v
	}
	f.Func(name, f.usage(name, usage)+" (secret; prefer the variable to the flag)", func(s string) error {
		*p = s
		return nil
	})
}

// connString registers a connection string flag (a PostgreSQL URL): like String, but -h
// shows its default (which may come from the variable) with the password masked.
func (f *envFlags) connString(p *string, name, def, usage string) {
	if v, ok := f.env(name); ok {
		def = v
	}
	*p = def
	f.Func(name, f.usage(name, usage)+fmt.Sprintf(" (default %q)", redactConnString(def)), func(s string) error {
		*p = s
		return nil
	})
}

// redactConnString masks the password of a URL (user info or a password parameter); a
// keyword/value string ("host=... password=...") is not shown at all.
func redactConnString(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return "(set, not shown)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// Parse parses args and reports the first bad environment variable.
func (f *envFlags) Parse(args []string) error {
	if err := f.FlagSet.Parse(args); err != nil {
		return err
	}
	if len(f.errs) > 0 {
		return f.errs[0]
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
