package main

import (
	"fmt"
	"net"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// redisConn is how dispatch reaches Redis besides the address: an ACL user (or just a
// password, for requirepass) and TLS. Separate flags rather than a redis:// URL, so that
// the password is never part of a string that may end up in a log or in `-h`.
type redisConn struct {
	TLS      tlsFlags
	Username string
	Password secretSource
}

func (r *redisConn) register(f *envFlags) {
	r.TLS.register(f, "redis", "Redis")
	f.String(&r.Username, "redis-username", "", "Redis ACL user (default: the default user)")
	r.Password.register(f, "redis-password", "Redis password (of --redis-username, or requirepass)")
}

func (r *redisConn) validate() error {
	if r.Username != "" && !r.Password.set() {
		return fmt.Errorf("--redis-username needs --redis-password (or --redis-password-file)")
	}
	return r.TLS.validate()
}

// options are the go-redis options of dispatch's client.
func (r *redisConn) options(addr string) (*redis.Options, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	pass, err := r.Password.get()
	if err != nil {
		return nil, err
	}
	o := &redis.Options{Addr: addr, Username: r.Username, Password: pass}
	if o.TLSConfig, err = r.TLS.config(); err != nil {
		return nil, err
	}
	if o.TLSConfig != nil && o.TLSConfig.ServerName == "" {
		// go-redis does not fill in the name to verify from the address (kgo does).
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("--redis-addr: %w", err)
		}
		o.TLSConfig.ServerName = host
	}
	return o, nil
}

func (r *redisConn) logFields(addr string) []zap.Field {
	return []zap.Field{
		zap.String("redis_addr", addr),
		zap.Bool("redis_tls", r.TLS.on()),
		zap.Bool("redis_auth", r.Password.set()),
	}
}
