package herald

// CampaignStatus is the state of a campaign row (docs/api.md, Campaigns):
//
//	DRAFT ─start─▶ EXPANDING ─last lot─▶ ACTIVE ─every delivery final─▶ DONE
//	DRAFT / EXPANDING / ACTIVE ─cancel─▶ CANCELLED
//
// The campaign table's CHECK constraint holds the same list (internal/migrate's test
// compares them).
type CampaignStatus string

const (
	CampaignDraft     CampaignStatus = "DRAFT"     // recipients may still be added; nothing is written
	CampaignExpanding CampaignStatus = "EXPANDING" // the expander writes its notifications lot by lot
	CampaignActive    CampaignStatus = "ACTIVE"    // every notification is written; deliveries are under way
	CampaignDone      CampaignStatus = "DONE"      // every delivery is final
	CampaignCancelled CampaignStatus = "CANCELLED" // cancelled; its PENDING and QUEUED deliveries are CANCELLED
)

// CampaignStatuses lists every campaign status in the order of its life. It returns a new
// slice each call.
func CampaignStatuses() []CampaignStatus {
	return []CampaignStatus{CampaignDraft, CampaignExpanding, CampaignActive, CampaignDone, CampaignCancelled}
}
