package console

import (
	"errors"
	"net/http"

	"github.com/heraldhq/herald/internal/timeline"
)

type notificationData struct {
	*timeline.Timeline
	JaegerURL string
}

// notification shows the timeline of a notification (or of a delivery's notification): the
// view of herald trace, with links to the trace in the console's trace view and in Jaeger when
// Config.JaegerURL is set.
func (c *Console) notification(w http.ResponseWriter, r *http.Request) {
	tl, err := timeline.Load(r.Context(), c.pool, r.PathValue("id"), "")
	if errors.Is(err, timeline.ErrNotFound) {
		c.fail(w, http.StatusNotFound, "no notification or delivery has this id", nil)
		return
	}
	if err != nil {
		c.fail(w, http.StatusInternalServerError, "the timeline could not be read", err)
		return
	}
	c.render(w, http.StatusOK, "notification", page{Title: "Notification " + tl.NotificationID, LoggedIn: true, Nav: "messages",
		Data: notificationData{Timeline: tl, JaegerURL: timeline.JaegerURL(c.cfg.JaegerURL, tl.TraceID)}})
}
