package recipient

import "github.com/heraldhq/herald"

// ChannelSet is the set of channels an installation delivers (the channels it has a provider
// for); the zero value holds every channel.
type ChannelSet struct {
	only map[herald.Channel]bool // nil: every channel
}

// NewChannelSet returns the set of channels; none given: every channel.
func NewChannelSet(channels []herald.Channel) ChannelSet {
	if len(channels) == 0 {
		return ChannelSet{}
	}
	s := ChannelSet{only: make(map[herald.Channel]bool, len(channels))}
	for _, c := range channels {
		s.only[c] = true
	}
	return s
}

// Has reports whether the installation delivers c.
func (s ChannelSet) Has(c herald.Channel) bool { return s.only == nil || s.only[c] }

// HasAny reports whether the installation delivers at least one of channels.
func (s ChannelSet) HasAny(channels []herald.Channel) bool {
	for _, c := range channels {
		if s.Has(c) {
			return true
		}
	}
	return false
}
