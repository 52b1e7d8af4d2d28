// Package cekafka is the CloudEvents Kafka protocol binding in binary content mode for
// franz-go records, in the conventions of the CloudEvents Go SDK's own Kafka bindings (which
// are written for other Kafka clients): every context attribute and extension is a header
// named ce_<attribute>, datacontenttype is the content-type header, the data is the record
// value. Events are built and validated with the SDK (event.Event), written through the
// SDK's binding.Write and read back with binding.ToEvent, so the mapping of attribute types
// to header strings is the SDK's. WriteBinary writes an event of known, string-valued
// attributes straight into a record, in the same headers, for the relay's hot path.
package cekafka

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"time"

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

// Binary is a CloudEvents 1.0 event whose attributes are all strings but its time, as
// WriteBinary writes it: id, source and type are required, subject and datacontenttype may
// be empty (then absent), Time is set when not zero, and each extension is a lower-case
// name with a non-empty string value.
type Binary struct {
	ID, Source, Type, Subject, DataContentType string
	Time                                       time.Time
	Extensions                                 []Extension
	Data                                       []byte
}

// Extension is one extension attribute of a Binary event.
type Extension struct{ Name, Value string }

// WriteBinary sets rec's value to e's data and appends e's headers, the ones Write appends
// for the same event (TestWriteBinaryIsWrite), without building an event.Event and walking
// it through binding.Write: one header slice grown once, no reflection on value types.
func WriteBinary(e Binary, rec *kgo.Record) error {
	if e.ID == "" || e.Source == "" || e.Type == "" {
		return errors.New("cekafka: an event needs an id, a source and a type")
	}
	h := rec.Headers
	if need := len(h) + 7 + len(e.Extensions); cap(h) < need {
		h = append(make([]kgo.RecordHeader, 0, need), h...)
	}
	h = append(h, kgo.RecordHeader{Key: specVersionHeader, Value: specVersion10},
		kgo.RecordHeader{Key: Prefix + "id", Value: []byte(e.ID)},
		kgo.RecordHeader{Key: Prefix + "source", Value: []byte(e.Source)},
		kgo.RecordHeader{Key: Prefix + "type", Value: []byte(e.Type)})
	if e.Subject != "" {
		h = append(h, kgo.RecordHeader{Key: Prefix + "subject", Value: []byte(e.Subject)})
	}
	if !e.Time.IsZero() {
		h = append(h, kgo.RecordHeader{Key: Prefix + "time", Value: e.Time.UTC().AppendFormat(nil, time.RFC3339Nano)})
	}
	if e.DataContentType != "" {
		h = append(h, kgo.RecordHeader{Key: ContentType, Value: []byte(e.DataContentType)})
	}
	for _, x := range e.Extensions {
		h = append(h, kgo.RecordHeader{Key: Prefix + x.Name, Value: []byte(x.Value)})
	}
	rec.Headers, rec.Value = h, e.Data
	return nil
}

// The ce_specversion header of every event WriteBinary writes.
var (
	specVersionHeader = Prefix + "specversion"
	specVersion10     = []byte(event.CloudEventsVersionV1)
)

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
