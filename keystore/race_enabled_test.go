//go:build race

package keystore

// raceDetector is set when the tests run under the race detector, which makes every SQLite
// call many times slower.
const raceDetector = true
