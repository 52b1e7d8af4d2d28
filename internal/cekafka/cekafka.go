// Package cekafka is the CloudEvents Kafka protocol binding in binary content mode for
// franz-go records, in the conventions of the CloudEvents Go SDK's own Kafka bindings (which
// are written for other Kafka clients): every context attribute and extension is a header
// named ce_<attribute>, datacontenttype is the content-type header, the data is the record
// value. Events are built and validated with the SDK (event.Event), written through the
// SDK's binding.Write and read back with binding.ToEvent, so the mapping of attribute types
// to header strings is the SDK's.
package cekafka

import (
	"bytes"
	"context"
	"io"
	"strings"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Prefix of the header of every CloudEvents attribute, ContentType the header of
// datacontenttype (the CloudEvents Kafka binding).
const (
	Prefix      = "ce_"
	ContentType = "content-type"
)

var specs = spec.WithPrefix(Prefix)

// Write sets rec's value and appends the headers of e in binary mode. e must be valid.
func Write(ctx context.Context, e *event.Event, rec *kgo.Record) error {
	_, err := binding.Write(binding.WithForceBinary(ctx), binding.ToMessage(e), nil, (*recordWriter)(rec))
	return err
}

// recordWriter is a binding.BinaryWriter onto a record.
type recordWriter kgo.Record

func (w *recordWriter) Start(context.Context) error { return nil }
func (w *recordWriter) End(context.Context) error   { return nil }

func (w *recordWriter) SetAttribute(a spec.Attribute, value any) error {
	if a.Kind() == spec.DataContentType {
		return w.header(ContentType, value)
	}
	return w.header(Prefix+a.Name(), value)
}

func (w *recordWriter) SetExtension(name string, value any) error {
	return w.header(Prefix+name, value)
}

func (w *recordWriter) header(key string, value any) error {
	if value == nil {
		return nil
	}
	s, err := types.Format(value)
	if err != nil {
		return err
	}
	w.Headers = append(w.Headers, kgo.RecordHeader{Key: key, Value: []byte(s)})
	return nil
}

func (w *recordWriter) SetData(r io.Reader) error {
	b, err := io.ReadAll(r)
	w.Value = b
	return err
}

// Message reads a record as a CloudEvents message (binding.ToEvent turns it into an event).
// A record without a ce_specversion header is not a binary-mode event: its encoding is
// binding.EncodingUnknown.
type Message struct {
	rec     *kgo.Record
	version spec.Version
}

// NewMessage returns the message of rec.
func NewMessage(rec *kgo.Record) *Message {
	m := &Message{rec: rec}
	for _, h := range rec.Headers {
		if h.Key == specs.PrefixedSpecVersionName() {
			m.version = specs.Version(string(h.Value))
		}
	}
	return m
}

// ReadEncoding implements binding.MessageReader.
func (m *Message) ReadEncoding() binding.Encoding {
	if m.version == nil {
		return binding.EncodingUnknown
	}
	return binding.EncodingBinary
}

// ReadStructured implements binding.MessageReader: records are never structured here.
func (m *Message) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

// ReadBinary implements binding.MessageReader.
func (m *Message) ReadBinary(ctx context.Context, w binding.BinaryWriter) error {
	if m.version == nil {
		return binding.ErrNotBinary
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	for _, h := range m.rec.Headers {
		var err error
		switch key := strings.ToLower(h.Key); {
		case key == ContentType:
			err = w.SetAttribute(m.version.AttributeFromKind(spec.DataContentType), string(h.Value))
		case strings.HasPrefix(key, Prefix):
			if a := m.version.Attribute(key); a != nil {
				err = w.SetAttribute(a, string(h.Value))
			} else {
				err = w.SetExtension(strings.TrimPrefix(key, Prefix), string(h.Value))
			}
		}
		if err != nil {
			return err
		}
	}
	if len(m.rec.Value) > 0 {
		if err := w.SetData(bytes.NewReader(m.rec.Value)); err != nil {
			return err
		}
	}
	return w.End(ctx)
}

// Finish implements binding.Message.
func (m *Message) Finish(error) error { return nil }

// GetAttribute implements binding.MessageMetadataReader.
func (m *Message) GetAttribute(k spec.Kind) (spec.Attribute, any) {
	if m.version == nil {
		return nil, nil
	}
	a := m.version.AttributeFromKind(k)
	if a == nil {
		return nil, nil
	}
	key := a.PrefixedName()
	if k == spec.DataContentType {
		key = ContentType
	}
	if v, ok := m.header(key); ok {
		return a, v
	}
	return a, nil
}

// GetExtension implements binding.MessageMetadataReader.
func (m *Message) GetExtension(name string) any {
	if v, ok := m.header(Prefix + strings.ToLower(name)); ok {
		return v
	}
	return nil
}

func (m *Message) header(key string) (string, bool) {
	for _, h := range m.rec.Headers {
		if strings.EqualFold(h.Key, key) {
			return string(h.Value), true
		}
	}
	return "", false
}
