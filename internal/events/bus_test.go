package events

import (
	"slices"
	"sync"
	"testing"
)

func TestBus(t *testing.T) {
	var b Bus[int]
	var got []string
	first := b.Subscribe(func(e int) { got = append(got, "a", string(rune('0'+e))) })
	var second func()
	second = b.Subscribe(func(e int) {
		got = append(got, "b", string(rune('0'+e)))
		second() // unsubscribing while handling takes effect from the next event
	})
	b.Publish(1)
	b.Publish(2)
	first()
	b.Publish(3)
	if want := []string{"a", "1", "b", "1", "a", "2"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestBusConcurrent(t *testing.T) {
	var b Bus[int]
	var mu sync.Mutex
	n := 0
	b.Subscribe(func(int) { mu.Lock(); n++; mu.Unlock() })
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Publish(1)
				b.Subscribe(func(int) {})()
			}
		})
	}
	wg.Wait()
	if n != 800 {
		t.Fatalf("heard %d events, want 800", n)
	}
}
