package main

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/hpncp/hpncp/internal/vis"
)

// barProgress shows a progress bar on a terminal: name, bytes, rate and
// time left, as scp does. Files copied at once share one bar, which
// counts the bytes of all of them and grows as files start; it ends its
// line when the last file in flight ends.
type barProgress struct {
	w       io.Writer
	bar     *progressbar.ProgressBar
	size    int64 // the bytes of the files the bar counts
	active  int   // files started and not yet ended
	started int   // files the bar counts
}

func newBarProgress(w io.Writer) *barProgress { return &barProgress{w: w} }

func (p *barProgress) StartFile(name string, size int64) {
	p.active++
	p.started++
	p.size += size
	if p.bar != nil {
		p.bar.ChangeMax64(p.size)
		p.bar.Describe(fmt.Sprintf("%d files", p.started))
		return
	}
	p.bar = progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(vis.String(name)),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetWidth(30),
		progressbar.OptionOnCompletion(func() { _, _ = io.WriteString(p.w, "\n") }),
	)
}

func (p *barProgress) Add(n int) { _ = p.bar.Add(n) }

func (p *barProgress) EndFile() {
	p.active--
	if p.active > 0 {
		return
	}
	if p.bar.State().CurrentNum < p.bar.GetMax64() {
		// A failed copy: leave the bar where it stopped, on its own line.
		_, _ = io.WriteString(p.w, "\n")
	} else {
		_ = p.bar.Finish()
	}
	p.bar = nil
	p.size, p.started = 0, 0
}
