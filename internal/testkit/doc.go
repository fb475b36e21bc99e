// Package testkit holds what tests of the runtime's packages share: archive builders for
// crafting (hostile) uploads, Eventually for waiting on a condition without fixed sleeps,
// programs built once per test process (the test worker), free ports, a concurrency-safe
// output buffer, a stand-in unix socket service, and the test binary run again as a program.
// It imports no package of the runtime, so engine unit tests and the integration harness can
// both use it.
package testkit
