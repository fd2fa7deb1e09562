//go:build !amd64

package delta

const haveWeakVector = false

func weakVector(p []byte) (a, b uint32) { panic("delta: no vector weak sum here") }
