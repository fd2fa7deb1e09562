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

// fileTally is a FilesProgress that keeps what each file it was told of
// received, and, like a terminal line, is not safe for calls at once.
type fileTally struct {
	eventLog
	started  []*tallied
	inFlight int
	most     int // files in flight at once
}

type tallied struct {
	t      *fileTally
	name   string
	files  int
	size   int64
	got    int64
	ended  bool
	misuse string
}

func (f *fileTally) Start(name string, files int, size int64) FileProgress {
	x := &tallied{t: f, name: name, files: files, size: size}
	f.started = append(f.started, x)
	f.inFlight++
	f.most = max(f.most, f.inFlight)
	return x
}

func (x *tallied) Add(n int) {
	if x.ended {
		x.misuse = "add after end"
	}
	x.got += int64(n)
}

func (x *tallied) End() {
	if x.ended {
		x.misuse = "ended twice"
	}
	x.ended = true
	x.t.inFlight--
}

// totals checks that every file was ended once with all its bytes, and
// returns the files and bytes told.
func (f *fileTally) totals(t *testing.T) (files int, bytes int64) {
	t.Helper()
	if len(f.events) > 0 {
		t.Errorf("the run used the plain calls of a FilesProgress: %q", f.events[:min(len(f.events), 5)])
	}
	for _, x := range f.started {
		if !x.ended || x.misuse != "" || x.got != x.size {
			t.Errorf("%s: ended %v, %d of %d bytes, %s", x.name, x.ended, x.got, x.size, x.misuse)
		}
		files += x.files
		bytes += x.got
	}
	return files, bytes
}

func TestRunProgressFilesApartAreAllShown(t *testing.T) {
	var tally fileTally
	r := newRunProgress(&tally, nil, true)
	one, two := r.job(), r.job()
	one.StartFile("a", 3)
	two.StartFile("b", 4) // shown too: a FilesProgress follows both
	two.Add(4)
	one.Add(3)
	two.EndFile()
	one.EndFile()
	if files, bytes := tally.totals(t); files != 2 || bytes != 7 || tally.most != 2 {
		t.Errorf("told %d files, %d bytes, %d at once; want 2, 7, 2", files, bytes, tally.most)
	}
}

func TestFileProgressGivesEachFileItsOwn(t *testing.T) {
	var tally fileTally
	engine := newRunProgress(&tally, nil, false).job()
	a, b := fileProgress(engine), fileProgress(engine)
	a.StartFile("a", 3)
	b.StartFile("b", 5)
	b.Add(5)
	a.Add(3)
	b.EndFile()
	a.EndFile()
	if files, bytes := tally.totals(t); files != 2 || bytes != 8 {
		t.Errorf("told %d files, %d bytes; want 2, 8", files, bytes)
	}
	// A run inside the run (tar mode's side copies) tells the same
	// FilesProgress, and a tar stream's batch counts as its files.
	inner := newRunProgress(engine, nil, true).job()
	startFiles(inner, "10 files (tar)", 10, 100)
	inner.Add(100)
	inner.EndFile()
	if files, bytes := tally.totals(t); files != 12 || bytes != 108 {
		t.Errorf("told %d files, %d bytes; want 12, 108", files, bytes)
	}
}

func TestFileProgressOfAPlainProgressIsItself(t *testing.T) {
	var log eventLog
	engine := newRunProgress(&log, nil, false).job()
	if p := fileProgress(engine); p != Progress(engine) {
		t.Errorf("fileProgress gave a new job to a plain Progress")
	}
	startFiles(engine, "2 files (tar)", 2, 6)
	engine.EndFile()
	if want := []string{"start 2 files (tar) 6", "end"}; !reflect.DeepEqual(log.events, want) {
		t.Errorf("calls %q, want %q", log.events, want)
	}
}
