//go:build amd64

#include "textflag.h"

// The weight of each byte of a 32-byte step in b: 32 for the first, down
// to 1 for the last.
DATA weakWeights<>+0x00(SB)/8, $0x191a1b1c1d1e1f20
DATA weakWeights<>+0x08(SB)/8, $0x1112131415161718
DATA weakWeights<>+0x10(SB)/8, $0x090a0b0c0d0e0f10
DATA weakWeights<>+0x18(SB)/8, $0x0102030405060708
GLOBL weakWeights<>(SB), RODATA|NOPTR, $32

DATA weakOnes<>+0x00(SB)/8, $0x0001000100010001
DATA weakOnes<>+0x08(SB)/8, $0x0001000100010001
DATA weakOnes<>+0x10(SB)/8, $0x0001000100010001
DATA weakOnes<>+0x18(SB)/8, $0x0001000100010001
GLOBL weakOnes<>(SB), RODATA|NOPTR, $32

// func weakVector(p []byte) (a, b uint32)
//
// Y1: the bytes so far, as four 64-bit sums; Y2: the sum of Y1 before
// each step (b's 32 a per step); Y3: each step's weighted bytes, as eight
// 32-bit sums. Their totals wrap modulo 2^32, which keeps them right
// modulo 2^16.
TEXT ·weakVector(SB), NOSPLIT, $0-32
	MOVQ p_base+0(FP), SI
	MOVQ p_len+8(FP), CX
	SHRQ $5, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VMOVDQU weakWeights<>(SB), Y4
	VMOVDQU weakOnes<>(SB), Y5
	TESTQ CX, CX
	JZ    sums

step:
	VMOVDQU    (SI), Y6
	VPADDQ     Y1, Y2, Y2
	VPSADBW    Y0, Y6, Y7
	VPADDQ     Y7, Y1, Y1
	VPMADDUBSW Y4, Y6, Y8
	VPMADDWD   Y5, Y8, Y8
	VPADDD     Y8, Y3, Y3
	ADDQ       $32, SI
	DECQ       CX
	JNZ        step

sums:
	VEXTRACTI128 $1, Y1, X7
	VPADDQ       X7, X1, X1
	VPSHUFD      $0x4e, X1, X7
	VPADDQ       X7, X1, X1
	VMOVQ        X1, AX
	VEXTRACTI128 $1, Y2, X7
	VPADDQ       X7, X2, X2
	VPSHUFD      $0x4e, X2, X7
	VPADDQ       X7, X2, X2
	VMOVQ        X2, BX
	VEXTRACTI128 $1, Y3, X7
	VPADDD       X7, X3, X3
	VPSHUFD      $0x4e, X3, X7
	VPADDD       X7, X3, X3
	VPSHUFD      $0xb1, X3, X7
	VPADDD       X7, X3, X3
	VMOVD        X3, DX
	SHLQ         $5, BX
	ADDL         BX, DX
	MOVL         AX, a+24(FP)
	MOVL         DX, b+28(FP)
	VZEROUPPER
	RET
