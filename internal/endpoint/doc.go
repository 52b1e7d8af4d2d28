// Package endpoint is the store of client webhook endpoints (docs/webhook-endpoints.md): the
// endpoints themselves (webhook_endpoint), the messages owed to each (webhook_message: one
// status event for one endpoint, with its retry state) and the attempts log
// (webhook_attempt). The API (ingest) manages endpoints and replays through it; the events
// role writes and delivers messages through it. Every change of a message's state is one
// function here, a conditional UPDATE, and nowhere else.
package endpoint
