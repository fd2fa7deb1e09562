package transfer

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
)

// eventLog is a Progress that records its calls and, like a terminal
// bar, is not safe for calls at once.
type eventLog struct {
	events []string
	bytes  int
}

func (e *eventLog) StartFile(name string, size int64) {
	e.events = append(e.events, fmt.Sprintf("start %s %d", name, size))
}
func (e *eventLog) Add(n int) { e.bytes += n; e.events = append(e.events, fmt.Sprintf("add %d", n)) }
func (e *eventLog) EndFile()  { e.events = append(e.events, "end") }

func TestRunProgressEveryFile(t *testing.T) {
	var log eventLog
	p := newRunProgress(&log, nil, false).job()
	p.StartFile("a", 3)
	p.StartFile("b", 4)
	p.Add(3)
	p.Add(4)
	p.EndFile()
	p.EndFile()
	want := []string{"start a 3", "start b 4", "add 3", "add 4", "end", "end"}
	if !reflect.DeepEqual(log.events, want) {
		t.Errorf("calls %q, want %q", log.events, want)
	}
}

func TestRunProgressOneFileAtATime(t *testing.T) {
	var log eventLog
	r := newRunProgress(&log, nil, true)
	one, two := r.job(), r.job()
	one.StartFile("a", 3)
	two.StartFile("b", 4) // not shown: a has the progress
	two.Add(4)
	one.Add(3)
	two.EndFile()
	one.EndFile()
	two.StartFile("c", 5) // a ended: c is shown
	two.Add(5)
	two.EndFile()
	want := []string{"start a 3", "add 3", "end", "start c 5", "add 5", "end"}
	if !reflect.DeepEqual(log.events, want) {
		t.Errorf("calls %q, want %q", log.events, want)
	}
}

func TestRunProgressSerialisesJobs(t *testing.T) {
	var log eventLog
	var mu sync.Mutex
	p := newRunProgress(&log, &mu, false).job()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				p.Add(1)
			}
		}()
	}
	wg.Wait()
	if log.bytes != 8*500 {
		t.Errorf("counted %d bytes, want %d", log.bytes, 8*500)
	}
}

func TestRunProgressNone(t *testing.T) {
	p := newRunProgress(nil, nil, true).job()
	p.StartFile("a", 1)
	p.Add(1)
	p.EndFile()
}
