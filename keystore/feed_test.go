package keystore

import (
	"sync"
	"testing"
)

// TestFeed: a change reaches every subscriber of its topic and no other; changes made while
// a subscriber works merge into one value; an ended subscription hears nothing.
func TestFeed(t *testing.T) {
	var f Feed
	units1, end1 := f.Follow(UnitsTopic)
	units2, end2 := f.Follow(UnitsTopic, DomainsTopic)
	traffic, end3 := f.Follow(TrafficTopic)
	defer end2()
	defer end3()
	f.publish(UnitsTopic)
	f.publish(UnitsTopic)
	for _, tc := range []struct {
		name string
		ch   <-chan struct{}
		want int
	}{{"units subscriber", units1, 1}, {"units and domains subscriber", units2, 1}, {"traffic subscriber", traffic, 0}} {
		if got := drain(tc.ch); got != tc.want {
			t.Errorf("%s: %d values after two units changes, want %d", tc.name, got, tc.want)
		}
	}
	f.publish(DomainsTopic)
	if drain(units2) != 1 || drain(units1) != 0 {
		t.Error("a domains change did not reach only the domains subscriber")
	}
	end1()
	end1() // ending twice is harmless
	f.publish(UnitsTopic)
	if drain(units1) != 0 || drain(units2) != 1 {
		t.Error("an ended subscription heard a change, or a live one missed it")
	}
}

func drain(ch <-chan struct{}) int {
	n := 0
	for {
		select {
		case <-ch:
			n++
		default:
			return n
		}
	}
}

// followed is, by store, the tests' subscription to each topic of its feed, made by watch
// when a test opens the store, so a change made after the opening is seen.
var followed sync.Map // *Store → map[Topic]<-chan struct{}

func watch(s *Store) {
	m := map[Topic]<-chan struct{}{}
	for _, topic := range []Topic{UnitsTopic, TrafficTopic, SecretsTopic, DomainsTopic} {
		m[topic], _ = s.Feed.Follow(topic) // ends with the test's store
	}
	followed.Store(s, m)
}

// changes is the tests' subscription to topic of s's feed (see watch).
func changes(s *Store, topic Topic) <-chan struct{} {
	m, _ := followed.Load(s)
	return m.(map[Topic]<-chan struct{})[topic]
}

// changed reports whether s's feed announced a change of topic, and takes the announcement.
func changed(s *Store, topic Topic) bool {
	select {
	case <-changes(s, topic):
		return true
	default:
		return false
	}
}
