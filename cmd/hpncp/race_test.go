//go:build race

package main

// The race detector takes several times the memory a run would: bounds
// on peak RSS allow for it.
func init() { raceDetector = true }
