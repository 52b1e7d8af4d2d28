package console

import (
	"encoding/binary"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
)

// selectMessages is one page of the message log, newest first: deliveries with their
// notification's user, template and priority. Pagination is a keyset on the delivery id,
// a UUIDv7 and so in creation order: $1 is the last id of the previous page. The time range
// is a range of ids too ($2 <= id < $3, the smallest UUIDv7 of each time), so every page
// is a backward scan of the primary key however old the rows are. Every other filter is
// NULL when not set.
const selectMessages = `
SELECT d.id::text, d.notification_id::text, n.user_id, d.channel, d.priority, n.template, d.status,
       d.attempts, coalesce(d.provider, ''), d.created_at, d.updated_at
  FROM delivery d JOIN notification n ON n.id = d.notification_id
 WHERE ($1::uuid IS NULL OR d.id < $1::uuid)
   AND ($2::uuid IS NULL OR d.id >= $2::uuid)
   AND ($3::uuid IS NULL OR d.id < $3::uuid)
   AND ($4::bigint IS NULL OR n.user_id = $4::bigint)
   AND ($5::text IS NULL OR d.status = $5::text)
   AND ($6::text IS NULL OR d.channel = $6::text)
   AND ($7::text IS NULL OR d.priority = $7::text)
   AND ($8::text IS NULL OR n.template = $8::text)
 ORDER BY d.id DESC
 LIMIT $9`

// message is one row of the log: ids, statuses and codes only.
type message struct {
	ID, NotificationID string
	UserID             int64
	Channel            string
	Priority           string
	Template           string
	Status             string
	Attempts           int
	Provider           string
	Created, Updated   time.Time
}

// filter is the message log's query string, as typed (for the form) and as parsed.
type filter struct {
	User, Status, Channel, Priority, Template, From, To, Cursor string

	user             *int64
	from, to, cursor *uuid.UUID
}

// timeForm is how the form's datetime-local inputs send a time; it is read as UTC.
const timeForm = "2006-01-02T15:04"

var errFilter = errors.New("bad filter")

func parseFilter(q url.Values) (filter, error) {
	f := filter{User: q.Get("user"), Status: q.Get("status"), Channel: q.Get("channel"), Priority: q.Get("priority"),
		Template: strings.TrimSpace(q.Get("template")), From: q.Get("from"), To: q.Get("to"), Cursor: q.Get("cursor")}
	bad := func(what string) (filter, error) { return f, fmt.Errorf("%w: %s", errFilter, what) }
	if f.User != "" {
		n, err := strconv.ParseInt(f.User, 10, 64)
		if err != nil || n <= 0 {
			return bad("user id: a positive integer")
		}
		f.user = &n
	}
	if f.Status != "" && !knownStatus(herald.Status(f.Status)) {
		return bad("status: one of the delivery states")
	}
	if f.Channel != "" {
		if _, err := herald.ParseChannel(f.Channel); err != nil {
			return bad("channel: PUSH, EMAIL, SMS or WEBHOOK")
		}
	}
	if f.Priority != "" {
		if _, err := herald.ParsePriority(f.Priority); err != nil {
			return bad("priority: HIGH, NORMAL or LOW")
		}
	}
	if len(f.Template) > 100 {
		return bad("template: at most 100 characters")
	}
	for _, tf := range []struct {
		in  string
		out **uuid.UUID
	}{{f.From, &f.from}, {f.To, &f.to}} {
		if tf.in == "" {
			continue
		}
		t, err := time.Parse(timeForm, tf.in)
		if err != nil {
			if t, err = time.Parse(time.RFC3339, tf.in); err != nil {
				return bad("time: YYYY-MM-DDTHH:MM (UTC) or RFC 3339")
			}
		}
		id := minUUIDv7(t)
		*tf.out = &id
	}
	if f.Cursor != "" {
		id, err := uuid.Parse(f.Cursor)
		if err != nil {
			return bad("cursor")
		}
		f.cursor = &id
	}
	return f, nil
}

func knownStatus(s herald.Status) bool { return slices.Contains(herald.Statuses(), s) }

// minUUIDv7 is the smallest UUIDv7 of t's millisecond: every id made at t or later is at
// least this, every id made before is less.
func minUUIDv7(t time.Time) uuid.UUID {
	var id uuid.UUID
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(id[:6], ms[2:])
	id[6], id[8] = 0x70, 0x80
	return id
}

// query is the filter's query string with cursor replaced.
func (f filter) query(cursor string) string {
	q := url.Values{}
	for k, v := range map[string]string{"user": f.User, "status": f.Status, "channel": f.Channel, "priority": f.Priority,
		"template": f.Template, "from": f.From, "to": f.To, "cursor": cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q.Encode()
}

type messagesData struct {
	Filter                         filter
	Error                          string
	Rows                           []message
	Next                           template.URL // query string of the next page, "" on the last
	Statuses, Channels, Priorities []string
}

func (c *Console) messages(w http.ResponseWriter, r *http.Request) {
	d := messagesData{Rows: []message{}, Channels: names(herald.Channels), Priorities: names(herald.Priorities),
		Statuses: names(herald.Statuses())}
	f, err := parseFilter(r.URL.Query())
	d.Filter = f
	if err != nil {
		d.Error = err.Error()
		c.render(w, http.StatusBadRequest, "messages", page{Title: "Messages", LoggedIn: true, Nav: "messages", Data: d})
		return
	}
	rows, err := c.pool.Query(r.Context(), selectMessages, f.cursor, f.from, f.to, f.user,
		nullable(f.Status), nullable(f.Channel), nullable(f.Priority), nullable(f.Template), c.cfg.PageSize+1)
	if err == nil {
		d.Rows, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (message, error) {
			var m message
			err := row.Scan(&m.ID, &m.NotificationID, &m.UserID, &m.Channel, &m.Priority, &m.Template, &m.Status,
				&m.Attempts, &m.Provider, &m.Created, &m.Updated)
			return m, err
		})
	}
	if err != nil {
		c.fail(w, http.StatusInternalServerError, "the message log could not be read", fmt.Errorf("read message log: %w", err))
		return
	}
	if len(d.Rows) > c.cfg.PageSize {
		d.Rows = d.Rows[:c.cfg.PageSize]
		// url.Values.Encode escaped every value: a query string that html/template may
		// put in the href as is.
		d.Next = template.URL(f.query(d.Rows[len(d.Rows)-1].ID)) //nolint:gosec // built by url.Values.Encode
	}
	c.render(w, http.StatusOK, "messages", page{Title: "Messages", LoggedIn: true, Nav: "messages", Data: d})
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func names[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
