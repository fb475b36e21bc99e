package keystore

import "sync"

// Topic is a part of the key store whose changes its Feed announces.
type Topic uint8

// Topics of the Feed.
const (
	// UnitsTopic is the desired state: units, their versions and reloads (see Units).
	UnitsTopic Topic = iota
	// TrafficTopic is the traffic splits (see Traffic).
	TrafficTopic
	// SecretsTopic is the workers' secrets (see Secrets).
	SecretsTopic
	// DomainsTopic is the custom domains (see Domains).
	DomainsTopic
)

// Feed announces each change of the key store, one made through this Store or one a pull
// brought from the primary, to every subscriber of the changed topic. It is the one way
// changes reach the runtime's parts that follow them.
type Feed struct {
	mu   sync.Mutex
	subs map[*subscription]struct{}
}

type subscription struct {
	topics []Topic
	ch     chan struct{}
}

// Follow returns a channel that receives a value after each change of one of topics, and
// the func that ends the subscription. Changes that come while the subscriber works merge
// into one value, so a subscriber reads again what it follows after each value: it misses
// no change, though it may find nothing new. Subscribe before the first read, so a change
// between that read and the subscription is not lost.
func (f *Feed) Follow(topics ...Topic) (<-chan struct{}, func()) {
	sub := &subscription{topics: topics, ch: make(chan struct{}, 1)}
	f.mu.Lock()
	if f.subs == nil {
		f.subs = map[*subscription]struct{}{}
	}
	f.subs[sub] = struct{}{}
	f.mu.Unlock()
	var once sync.Once
	return sub.ch, func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.subs, sub)
			f.mu.Unlock()
		})
	}
}

// publish tells the subscribers of topic that it changed, never waiting for one.
func (f *Feed) publish(topic Topic) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for sub := range f.subs {
		for _, t := range sub.topics {
			if t != topic {
				continue
			}
			select {
			case sub.ch <- struct{}{}:
			default:
			}
			break
		}
	}
}
