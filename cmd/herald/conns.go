package main

import "go.uber.org/zap"

// validateConns checks the Kafka and Redis connection settings without reading any file.
func (c *serveConfig) validateConns() error {
	if err := c.Kafka.validate(); err != nil {
		return err
	}
	return c.Redis.validate()
}

// connFields describe where herald connects, for the start-up log: addresses, whether TLS
// is on and the SASL mechanism; never a password or a connection string.
func (c *serveConfig) connFields() []zap.Field {
	return append(c.Kafka.logFields(c.KafkaBrokers), c.Redis.logFields(c.RedisAddr)...)
}
