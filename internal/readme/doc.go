// Package readme holds the test that runs README.md's first session as a
// newcomer pastes it, against a fresh server; it has no other code.
package readme
