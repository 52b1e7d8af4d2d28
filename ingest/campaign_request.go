package ingest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/heraldhq/herald"
)

// Campaign limits (docs/api.md).
const (
	// maxCampaignUserIDs bounds the user ids of one request (the create or one recipients
	// call); a larger list is answered 413 audience_too_large.
	maxCampaignUserIDs = 100_000
	// maxCampaignBodyBytes is the body limit of the campaign requests that carry user ids:
	// 100,000 ids of up to 19 digits and their commas, plus the rest of the request.
	maxCampaignBodyBytes = 4 << 20
	maxSegmentTags       = 32
	maxCampaignNameLen   = 200
)

// campaignRequest is the body of POST /api/campaigns as sent.
type campaignRequest struct {
	Name      *string          `json:"name"`
	Template  *string          `json:"template"`
	Channels  []string         `json:"channels"`
	Priority  *string          `json:"priority"`
	Payload   json.RawMessage  `json:"payload"`
	SendAt    *string          `json:"sendAt"`
	ExpiresAt *string          `json:"expiresAt"`
	Audience  *audienceRequest `json:"audience"`
	Start     *bool            `json:"start"`
}

type audienceRequest struct {
	UserIDs []int64         `json:"userIds"`
	Segment *segmentRequest `json:"segment"`
}

type segmentRequest struct {
	Tags   []string `json:"tags"`
	Locale *string  `json:"locale"`
}

// campaignInput is a validated, normalized campaign request; its JSON encoding is what the
// request hash covers: user ids sorted and deduplicated, channels in canonical order,
// defaults applied.
type campaignInput struct {
	Name      string           `json:"name"`
	Template  string           `json:"template"`
	Channels  []herald.Channel `json:"channels"`
	Priority  herald.Priority  `json:"priority"`
	Payload   json.RawMessage  `json:"payload"`
	payload   map[string]any   // Payload decoded, for the render check
	SendAt    *time.Time       `json:"sendAt,omitempty"`
	ExpiresAt *time.Time       `json:"expiresAt,omitempty"`
	UserIDs   []int64          `json:"userIds,omitempty"` // nil: a segment
	Segment   *segmentInput    `json:"segment,omitempty"`
	Start     bool             `json:"start"`
	// category is the template's, filled in by the creating transaction; not hashed.
	category string
}

type segmentInput struct {
	Tags   []string `json:"tags"`
	Locale string   `json:"locale,omitempty"` // a language tag prefix: "de" matches "de" and "de-AT"
}

// decodeCampaign decodes and validates a POST /api/campaigns body. Like decodeNotification
// it is pure; the template is checked in the creating transaction.
func decodeCampaign(body io.Reader, maxPayload int) (*campaignInput, error) {
	var req campaignRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	var fe fieldErrors
	in := &campaignInput{Priority: herald.PriorityLow, Start: true}
	if req.Name == nil || *req.Name == "" || len(*req.Name) > maxCampaignNameLen {
		fe.add("name", "is required: 1-%d bytes", maxCampaignNameLen)
	} else {
		in.Name = *req.Name
	}
	if req.Template == nil {
		fe.add("template", "is required")
	} else {
		in.Template = *req.Template
		checkTemplateName(&fe, "template", in.Template)
	}
	in.Channels = parseChannels(&fe, "channels", req.Channels, req.Channels != nil)
	if req.Priority != nil {
		p, err := herald.ParsePriority(*req.Priority)
		if err != nil {
			fe.add("priority", "must be HIGH, NORMAL or LOW")
		}
		in.Priority = p
	}
	in.Payload, in.payload = normalizeObject(&fe, "payload", req.Payload, maxPayload)
	in.SendAt = parseTimestamp(&fe, "sendAt", req.SendAt)
	in.ExpiresAt = parseTimestamp(&fe, "expiresAt", req.ExpiresAt)
	if in.SendAt != nil && in.ExpiresAt != nil && !in.ExpiresAt.After(*in.SendAt) {
		fe.add("expiresAt", "must be after sendAt")
	}
	if req.Start != nil {
		in.Start = *req.Start
	}
	a := req.Audience
	switch {
	case a == nil || (a.UserIDs == nil && a.Segment == nil):
		fe.add("audience", `is required: {"userIds": [...]} or {"segment": {...}}`)
	case a.UserIDs != nil && a.Segment != nil:
		fe.add("audience", "must hold either userIds or segment, not both")
	case a.Segment != nil:
		in.Segment = checkSegment(&fe, a.Segment)
	default:
		ids, err := checkUserIDs(&fe, "audience.userIds", a.UserIDs)
		if err != nil {
			return nil, err
		}
		in.UserIDs = ids
		if len(ids) == 0 && in.Start {
			fe.add("audience.userIds", "must not be empty unless start is false")
		}
	}
	if err := fe.err(); err != nil {
		return nil, err
	}
	return in, nil
}

// checkUserIDs validates a list of user ids and returns it sorted without duplicates. More
// than maxCampaignUserIDs is a 413.
func checkUserIDs(fe *fieldErrors, field string, ids []int64) ([]int64, error) {
	if len(ids) > maxCampaignUserIDs {
		return nil, newAPIError(http.StatusRequestEntityTooLarge, codeAudienceTooLarge,
			fmt.Sprintf("%s holds %d ids; at most %d per request (add more with POST /api/campaigns/{id}/recipients on a DRAFT campaign)",
				field, len(ids), maxCampaignUserIDs))
	}
	out := slices.Clone(ids)
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > 0 && out[0] <= 0 {
		fe.add(field, "must hold positive integers")
	}
	if out == nil {
		out = []int64{}
	}
	return out, nil
}

func checkSegment(fe *fieldErrors, s *segmentRequest) *segmentInput {
	seg := &segmentInput{Tags: []string{}}
	if len(s.Tags) > maxSegmentTags {
		fe.add("audience.segment.tags", "must hold at most %d tags", maxSegmentTags)
	}
	for i, t := range s.Tags {
		checkTag(fe, fmt.Sprintf("audience.segment.tags[%d]", i), t)
	}
	seg.Tags = slices.Compact(slices.Sorted(slices.Values(s.Tags)))
	if seg.Tags == nil {
		seg.Tags = []string{}
	}
	if s.Locale != nil && *s.Locale != "" {
		seg.Locale = checkLocale(fe, "audience.segment.locale", *s.Locale)
	}
	return seg
}

// checkTag validates a user tag: the format of a category.
func checkTag(fe *fieldErrors, field, tag string) {
	if !categoryRe.MatchString(tag) {
		fe.add(field, "must match %s", categoryRe.String())
	}
}

// hash returns the SHA-256 of the normalized request (see notificationInput.hash).
func (in *campaignInput) hash() []byte {
	b, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("marshal normalized campaign request: %v", err)) // plain data; cannot fail
	}
	h := sha256.Sum256(b)
	return h[:]
}
