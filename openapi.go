package herald

import _ "embed" // the API description

//go:embed docs/openapi.yaml
var openAPI []byte

// OpenAPI returns the OpenAPI 3.1 description of herald's HTTP API (docs/openapi.yaml), the
// one source that herald serves at GET /openapi.yaml, that the API tests validate every
// request and answer against, and that the Go client in client/ is generated from. The
// caller must not modify the slice.
func OpenAPI() []byte { return openAPI }
