package templates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	ttemplate "text/template"
)

// compileJSON decodes a webhook JSON template and parses every string in it (object keys
// excepted) as a text template. Numbers keep their literal form.
func compileJSON(raw json.RawMessage, field string, parse func(field, text string) (*ttemplate.Template, error)) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, field, err)
	}
	return compileValue(v, field, parse)
}

func compileValue(v any, path string, parse func(field, text string) (*ttemplate.Template, error)) (any, error) {
	switch x := v.(type) {
	case string:
		return parse(path, x)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // report the first error deterministically
		out := make(map[string]any, len(x))
		for _, k := range keys {
			c, err := compileValue(x[k], path+"."+k, parse)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := compileValue(e, fmt.Sprintf("%s[%d]", path, i), parse)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	return v, nil // json.Number, bool, nil
}

// execJSON renders a compiled JSON template into a value json.Marshal encodes; rendered
// strings are JSON-escaped by the encoder, so a payload value cannot break the structure.
func execJSON(v any, data any, path string, b *budget) (any, error) {
	switch x := v.(type) {
	case *ttemplate.Template:
		return execText(x, data, path, b)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := execJSON(e, data, path+"."+k, b)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := execJSON(e, data, fmt.Sprintf("%s[%d]", path, i), b)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}
