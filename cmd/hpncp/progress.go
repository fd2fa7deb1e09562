package main

import (
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// barProgress shows one progress bar per file on a terminal: name, bytes,
// rate and time left, as scp does.
type barProgress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func newBarProgress(w io.Writer) *barProgress { return &barProgress{w: w} }

func (p *barProgress) StartFile(name string, size int64) {
	p.bar = progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(name),
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
	if p.bar.State().CurrentNum < p.bar.GetMax64() {
		// A failed copy: leave the bar where it stopped, on its own line.
		_, _ = io.WriteString(p.w, "\n")
	} else {
		_ = p.bar.Finish()
	}
	p.bar = nil
}
