package delta

import "golang.org/x/sys/cpu"

// haveWeakVector says weakVector may run: it takes AVX2.
var haveWeakVector = cpu.X86.HasAVX2

// weakVector is weak's two sums of p, whose length is a multiple of 32,
// modulo 2^32 rather than 2^16, with AVX2: per 32 bytes, a sum of
// absolute differences against zero adds them up for a, and a multiply
// of the bytes by their weights (32 down to 1) adds them up for b,
// which also grows by 32 times the a before them. It is four to five
// times the speed of weakMore's words, and a signature's and a diff's
// time is mostly these sums.
//
//go:noescape
func weakVector(p []byte) (a, b uint32)
