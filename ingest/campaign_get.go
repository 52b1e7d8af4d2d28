package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/gorilla/mux"
	"github.com/jackc/pgx/v5"

	"github.com/heraldhq/herald"
	"github.com/heraldhq/herald/internal/delivery"
)

// campaignJSON is the answer of GET /api/campaigns/{id} and of the state-changing campaign
// calls.
type campaignJSON struct {
	ID       string                `json:"id"`
	Name     string                `json:"name"`
	Template string                `json:"template"`
	Channels []herald.Channel      `json:"channels"`
	Priority herald.Priority       `json:"priority"`
	Status   herald.CampaignStatus `json:"status"`
	// Audience is the number of distinct users of the audience: the staged ids of a list, or
	// the users the segment matched (counted at start, exact once expanded).
	Audience int64 `json:"audience"`
	// Expanded is the number of users whose lot is written.
	Expanded int64 `json:"expanded"`
	// Suppressed counts (user, channel) pairs that got no delivery, by reason.
	Suppressed map[string]int64 `json:"suppressed"`
	// Deliveries counts the campaign's deliveries by status; every status is present.
	Deliveries map[herald.Status]int64 `json:"deliveries"`
	CreatedAt  time.Time               `json:"createdAt"`
}

const selectCampaign = `
SELECT name, template, channels, priority, status, audience, expanded, suppressed, created_at
FROM campaign WHERE id = $1 AND client_id = $2`

// countCampaignDeliveries counts a campaign's deliveries by status, through the
// notification_campaign index and the delivery (notification_id, channel) key.
const countCampaignDeliveries = `
SELECT d.status, count(*) FROM notification n JOIN delivery d ON d.notification_id = n.id
WHERE n.campaign_id = $1 GROUP BY d.status`

// campaignIDVar parses the {id} path variable. A malformed id is no campaign: 404.
func campaignIDVar(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(mux.Vars(r)["id"])
	if err != nil {
		return uuid.UUID{}, errCampaignNotFound
	}
	return id, nil
}

var errCampaignNotFound = newAPIError(http.StatusNotFound, codeNotFound, "no such campaign")

func (a *API) getCampaign(w http.ResponseWriter, r *http.Request) {
	id, err := campaignIDVar(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := a.readCampaign(r.Context(), a.pool, id, clientFrom(r.Context()))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// readCampaign reads a campaign of clientID with its delivery counts. It writes nothing: the
// expander ends a campaign DONE (markDoneCampaigns).
func (a *API) readCampaign(ctx context.Context, db delivery.DB, id uuid.UUID, clientID string) (*campaignJSON, error) {
	c := &campaignJSON{ID: id.String(), Deliveries: make(map[herald.Status]int64, len(herald.Statuses()))}
	err := db.QueryRow(ctx, selectCampaign, id, clientID).Scan(&c.Name, &c.Template, &c.Channels, &c.Priority,
		&c.Status, &c.Audience, &c.Expanded, &c.Suppressed, &c.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errCampaignNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read campaign %s: %w", id, err)
	}
	c.CreatedAt = c.CreatedAt.UTC()
	for _, s := range herald.Statuses() {
		c.Deliveries[s] = 0
	}
	rows, err := db.Query(ctx, countCampaignDeliveries, id)
	if err != nil {
		return nil, fmt.Errorf("count deliveries of campaign %s: %w", id, err)
	}
	counts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct {
		s herald.Status
		n int64
	}, error) {
		var v struct {
			s herald.Status
			n int64
		}
		err := row.Scan(&v.s, &v.n)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("count deliveries of campaign %s: %w", id, err)
	}
	for _, v := range counts {
		c.Deliveries[v.s] = v.n
	}
	return c, nil
}
