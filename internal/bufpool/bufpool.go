// Package bufpool keeps large byte buffers, by size, from one use to the
// next: a tree of large files would otherwise allocate every stream's
// buffers again for each file. It is its own package, importing nothing of
// hpncp, so that the pipeline and the SFTP wire code share one pool
// without either importing the other.
package bufpool

import "sync"

var (
	mu    sync.RWMutex
	pools = map[int]*sync.Pool{} // by capacity, of *[]byte
)

func pool(size int) *sync.Pool {
	mu.RLock()
	p := pools[size]
	mu.RUnlock()
	if p != nil {
		return p
	}
	mu.Lock()
	defer mu.Unlock()
	if p = pools[size]; p == nil {
		p = new(sync.Pool)
		pools[size] = p
	}
	return p
}

// Get returns a buffer of size bytes, one given back by Put when there is
// one. Its contents are whatever the last user left.
func Get(size int) []byte {
	if b, ok := pool(size).Get().(*[]byte); ok {
		return (*b)[:size]
	}
	return make([]byte, size)
}

// Put gives b back for a later Get of its capacity. b must not be used
// after.
func Put(b []byte) {
	if cap(b) == 0 {
		return
	}
	pool(cap(b)).Put(&b)
}
