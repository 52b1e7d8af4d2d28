// Package events is the events role: it consumes the status events on Kafka (herald.events,
// CloudEvents binary mode) and delivers each to every webhook endpoint of the event's client
// whose filter takes it, as a CloudEvents structured-mode POST signed per Standard Webhooks
// with the client's secret (docs/webhook-endpoints.md).
//
// Durability: a batch of records becomes webhook_message rows (internal/endpoint) before its
// Kafka offsets are committed; from then on PostgreSQL holds what is owed, and a killed
// process's claims run out and are swept up by any events process. Isolation: every endpoint
// has its own queue and workers, the consumer never waits for one, and the role has its own
// database pool, so a slow or dead endpoint delays neither another endpoint nor a
// notification.
package events
