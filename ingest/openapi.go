package ingest

import (
	"net/http"
	"strconv"

	"github.com/heraldhq/herald"
)

// serveOpenAPI answers the API's OpenAPI 3.1 description (docs/openapi.yaml, embedded in
// the binary), without a key: it describes the routes, not anyone's data.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	doc := herald.OpenAPI()
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
	w.Header().Set("Cache-Control", "max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(doc) // a HEAD's body is discarded by net/http
}
