package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// decodeBody reads a JSON object from r into dst, enforcing the content type, the body
// limit, unknown fields and trailing data. Every failure is an *apiError: 415 for a
// non-JSON content type, 413 over maxBytes, 400 otherwise.
func decodeBody(w http.ResponseWriter, r *http.Request, maxBytes int64, dst any) error {
	if err := checkJSONContentType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	body := http.MaxBytesReader(w, r.Body, maxBytes)
	defer body.Close()
	return decodeJSON(body, dst)
}

// checkJSONContentType accepts application/json and any application/*+json type.
func checkJSONContentType(ct string) error {
	if ct == "" {
		return newAPIError(http.StatusUnsupportedMediaType, codeUnsupportedMediaType, "Content-Type must be application/json")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return newAPIError(http.StatusUnsupportedMediaType, codeUnsupportedMediaType, "unparsable Content-Type")
	}
	if mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return newAPIError(http.StatusUnsupportedMediaType, codeUnsupportedMediaType, "Content-Type must be application/json")
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return newAPIError(http.StatusUnsupportedMediaType, codeUnsupportedMediaType, "charset must be utf-8")
	}
	return nil
}

// decodeJSON decodes exactly one JSON object from rd into dst.
func decodeJSON(rd io.Reader, dst any) error {
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	// Exactly one value: anything but white space after it is malformed.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return jsonError(err)
		}
		return newAPIError(http.StatusBadRequest, codeMalformedJSON, "unexpected data after the JSON object")
	}
	return nil
}

// jsonError translates an encoding/json error into the API's answer.
func jsonError(err error) *apiError {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return newAPIError(http.StatusRequestEntityTooLarge, codeBodyTooLarge,
			fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
	case errors.Is(err, io.EOF):
		return newAPIError(http.StatusBadRequest, codeMalformedJSON, "empty body")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return newAPIError(http.StatusBadRequest, codeMalformedJSON, "unexpected end of JSON")
	case errors.As(err, &se):
		return newAPIError(http.StatusBadRequest, codeMalformedJSON,
			fmt.Sprintf("invalid JSON at byte %d", se.Offset))
	case errors.As(err, &te):
		if te.Field == "" {
			return newAPIError(http.StatusBadRequest, codeMalformedJSON, "body must be a JSON object")
		}
		return invalid(fieldError{Field: te.Field, Message: "must be " + jsonTypeName(te.Type.Kind().String())})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for this; the message format is stable.
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		e := newAPIError(http.StatusBadRequest, codeUnknownField, "unknown field "+name)
		e.fields = []fieldError{{Field: name, Message: "unknown field"}}
		return e
	}
	return newAPIError(http.StatusBadRequest, codeMalformedJSON, "invalid JSON")
}

func jsonTypeName(kind string) string {
	switch kind {
	case "int64", "int", "int32":
		return "an integer"
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return "of another type"
}
