package keystore

import "time"

// Observer hears how long each key store operation that reached the database took, by
// operation (e.g. "verify", "list"): answers from the caches are not queries.
type Observer func(op string, d time.Duration)

// SetObserver makes o hear of the store's queries from now on; nil stops it.
func (s *Store) SetObserver(o Observer) {
	if o == nil {
		s.observer.Store(nil)
		return
	}
	s.observer.Store(&o)
}

// timed starts timing a query of op; calling what it returns reports it.
func (s *Store) timed(op string) func() {
	o := s.observer.Load()
	if o == nil {
		return func() {}
	}
	start := time.Now()
	return func() { (*o)(op, time.Since(start)) }
}
