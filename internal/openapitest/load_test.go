package openapitest

import "testing"

// The description parses and is a valid OpenAPI 3.1 document.
func TestDescriptionIsValid(t *testing.T) {
	if _, err := Load(); err != nil {
		t.Fatal(err)
	}
}
