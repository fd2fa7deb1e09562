package bufpool

import "testing"

func TestGetHasTheSizeAsked(t *testing.T) {
	for _, size := range []int{1, 4 << 10, 1 << 20} {
		if b := Get(size); len(b) != size {
			t.Errorf("Get(%d) gave %d bytes", size, len(b))
		}
	}
}

// A buffer given back after it was cut shorter comes back whole: a
// reader handed the short one would fill only part of a request.
func TestPutShortBufferComesBackWhole(t *testing.T) {
	const size = 64 << 10
	for range 100 {
		b := Get(size)
		Put(b[:10])
		if got := Get(size); len(got) != size || cap(got) < size {
			t.Fatalf("Get(%d) after Put of a cut buffer: len %d cap %d", size, len(got), cap(got))
		}
	}
}

// Buffers of one size are never handed out for another.
func TestSizesKeptApart(t *testing.T) {
	for range 100 {
		Put(make([]byte, 8<<10))
		if b := Get(16 << 10); len(b) != 16<<10 {
			t.Fatalf("Get(16 KiB) gave %d bytes", len(b))
		}
		if b := Get(4 << 10); len(b) != 4<<10 {
			t.Fatalf("Get(4 KiB) gave %d bytes", len(b))
		}
	}
}

// A buffer given back is handed out again rather than allocated anew.
// sync.Pool may drop any one (under the race detector, at random), not
// all of a hundred.
func TestPutReusesBuffer(t *testing.T) {
	const size = 32 << 10
	for range 100 {
		b := Get(size)
		b[0] = 1
		Put(b)
		if got := Get(size); &got[0] == &b[0] {
			return
		}
	}
	t.Error("no buffer given back to Put was handed out again by Get")
}
