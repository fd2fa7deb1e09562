package helper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/hpncp/hpncp/stripe"
)

// Channel is one exec channel running the helper: its stdout (Read),
// its stdin (Write), and Close.
type Channel interface {
	io.Reader
	io.Writer
	Close() error
}

// ErrNoHelper is wrapped by Hello's error when the channel's first bytes
// are not a helper's hello (no helper there: the shell's "not found"),
// so the command can be run the plain way; nothing of it ran.
var ErrNoHelper = errors.New("no hpncp helper answered")

// Start sends the client's hello on the first channel, which names the
// command, and reads the helper's. Its error wraps ErrNoHelper where no
// helper of this protocol answered: then nothing of the command ran.
func Start(ch io.ReadWriter, command string) error {
	if len(command)+2 > stripe.MaxMessage {
		return fmt.Errorf("the command is %d bytes, more than the helper takes (%d)", len(command), stripe.MaxMessage-2)
	}
	hello := append([]byte{Protocol >> 8, Protocol & 0xff}, command...)
	if err := stripe.WriteFrame(ch, stripe.Frame{Kind: stripe.KindHello, Payload: hello}); err != nil {
		return fmt.Errorf("%w: %v", ErrNoHelper, err)
	}
	return Hello(ch)
}

// Hello reads the helper's hello, the first frame on the first channel.
func Hello(ch io.Reader) error {
	f, err := stripe.ReadFrame(ch, nil)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrNoHelper, err)
	case f.Kind == stripe.KindError:
		return fmt.Errorf("%w: it said: %s", ErrNoHelper, f.Payload)
	case f.Kind != stripe.KindHello || len(f.Payload) < 2:
		return fmt.Errorf("%w: its first frame was %s", ErrNoHelper, f.Kind)
	case int(f.Payload[0])<<8|int(f.Payload[1]) != Protocol:
		return fmt.Errorf("%w: it speaks protocol %d, not %d", ErrNoHelper, int(f.Payload[0])<<8|int(f.Payload[1]), Protocol)
	}
	return nil
}

// Refuse answers a client of another protocol, on the first channel, with
// an error frame in place of a hello: the client then runs its command the
// plain way. It returns the error the helper exits with.
func Refuse(w io.Writer, version string, theirs int) error {
	msg := fmt.Sprintf("this hpncp (%s) speaks helper protocol %d, not %d", version, Protocol, theirs)
	stripe.WriteFrame(w, stripe.Frame{Kind: stripe.KindError, Payload: []byte(msg)})
	return fmt.Errorf("serve: %s", msg)
}

// Exit is how the remote command ended, as the helper said.
type Exit struct {
	Status int    // -1 when it ended by a signal
	Signal string // the signal's name, without SIG
}

// parseExit reads a KindExit payload, "status N" or "signal NAME".
func parseExit(p []byte) (Exit, error) {
	word, rest, _ := strings.Cut(string(p), " ")
	switch word {
	case "status":
		n, err := strconv.Atoi(rest)
		if err == nil && 0 <= n && n <= 255 {
			return Exit{Status: n}, nil
		}
	case "signal":
		if rest != "" && len(rest) <= 16 && strings.IndexFunc(rest, func(r rune) bool {
			return !('A' <= r && r <= 'Z' || '0' <= r && r <= '9')
		}) < 0 {
			return Exit{Status: -1, Signal: rest}, nil
		}
	}
	return Exit{}, fmt.Errorf("%w: exit frame %q", stripe.ErrFrame, p)
}

// StripeOptions are a striped command's channels and local streams.
type StripeOptions struct {
	// Channels run the helper: the first, whose hello was read, and the
	// others, joined to the job.
	Channels []Channel
	// More, when not nil, brings channels that join while the command
	// runs (the further connections' dials take some ten round trips,
	// which the first channel spends carrying the streams); it is closed
	// once no more will come.
	More   <-chan Channel
	Stdin  io.Reader // nil: the command reads an end at once (-n)
	Stdout io.Writer
	Stderr io.Writer
	Frame  int // stdin's frames (stripe.DefaultFrame when 0)
	Budget int // each output stream's reorder budget (stripe.DefaultBudget when 0)
}

// Stripe sends stdin over every channel and writes the command's output as
// it comes back in order, until the command's exit. A channel lost, or a
// frame out of place, is an error (the output stops where the bytes in
// order stop), as is a command that ends without its exit reaching here.
func Stripe(ctx context.Context, o StripeOptions) (Exit, error) {
	out := stripe.NewMerger(stripe.Stdout, o.Budget)
	errs := stripe.NewMerger(stripe.Stderr, o.Budget)
	group := stripe.NewGroup(out, errs)

	var mu sync.Mutex
	var chans []Channel
	closed := false
	closeAll := func() {
		mu.Lock()
		closed = true
		all := chans
		mu.Unlock()
		for _, ch := range all {
			ch.Close()
		}
	}
	stop := context.AfterFunc(ctx, closeAll)
	defer stop()
	// The channels end with the command; one that joins later is closed
	// as it comes.
	defer closeAll()

	var exit *Exit
	var recvErr error
	firstDone := make(chan struct{})
	var sender *stripe.Sender
	if o.Stdin != nil {
		sender = stripe.NewSender(o.Stdin, stripe.Stdin, o.Frame)
		sender.SetReady(readyFunc(o.Stdin))
	}
	// add starts ch's frames: its output in, its share of stdin out. A
	// channel after the first starts once the helper's hello on it says
	// it joined; one that ends before (it came after the command's end)
	// carried nothing, and is closed.
	add := func(ch Channel, first bool) {
		mu.Lock()
		if closed {
			mu.Unlock()
			ch.Close()
			return
		}
		chans = append(chans, ch)
		mu.Unlock()
		if !first && Hello(ch) != nil {
			ch.Close()
			return
		}
		group.Add(1)
		control := func(f stripe.Frame) error {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case f.Kind == stripe.KindExit && first && exit == nil:
				e, err := parseExit(f.Payload)
				if err != nil {
					return err
				}
				exit = &e
				return nil
			case f.Kind == stripe.KindError:
				return fmt.Errorf("the helper gave up: %s", f.Payload)
			}
			return fmt.Errorf("%w: unexpected %s frame", stripe.ErrFrame, f.Kind)
		}
		go func() {
			defer group.Done()
			if first {
				defer close(firstDone)
			}
			err := stripe.Receive(ch, [stripe.MaxStreams]*stripe.Merger{stripe.Stdout: out, stripe.Stderr: errs}, control)
			if err != nil {
				mu.Lock()
				if recvErr == nil {
					recvErr = err
				}
				mu.Unlock()
			}
		}()
		w := stripe.Serial(ch)
		if sender == nil {
			if first {
				stripe.WriteFrame(w, stripe.Frame{Kind: stripe.KindEOF, Stream: stripe.Stdin})
			}
			stripe.WriteClose(w)
			return
		}
		go func() {
			if sender.Run(w) == nil {
				stripe.WriteClose(w)
			}
		}()
	}
	// The channels after the first count as one until the last has
	// joined or is given up: each waits for its hello apart.
	group.Add(1)
	var joining sync.WaitGroup
	for i, ch := range o.Channels {
		if i == 0 {
			add(ch, true)
			continue
		}
		joining.Go(func() { add(ch, false) })
	}
	go func() {
		defer group.Done()
		if o.More != nil {
			for ch := range o.More {
				joining.Go(func() { add(ch, false) })
			}
		}
		joining.Wait()
	}()

	var wg sync.WaitGroup
	var copyErr [2]error
	for i, c := range []struct {
		dst io.Writer
		src *stripe.Merger
	}{{o.Stdout, out}, {o.Stderr, errs}} {
		wg.Go(func() {
			if _, err := io.Copy(c.dst, c.src); err != nil {
				copyErr[i] = err
				// Nobody takes the output, or it broke: the channels go,
				// and with them the command.
				closeAll()
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Exit{}, err
	}
	if err := errors.Join(copyErr[:]...); err != nil {
		return Exit{}, err
	}
	// Both outputs ended in order; the exit comes on the first channel,
	// before its Close, which ends its Receive.
	select {
	case <-firstDone:
	case <-ctx.Done():
		return Exit{}, ctx.Err()
	}
	mu.Lock()
	defer mu.Unlock()
	// A channel lost is the job's loss, whatever came after: the helper
	// stops a command whose stdin cannot be whole, and its exit says
	// only that. A failed send of stdin is not: once the command has
	// ended, its channels close under the sender (yes | head -1); a
	// send lost before is a channel the helper saw lost, and it stops
	// the command.
	if recvErr != nil {
		return Exit{}, recvErr
	}
	if exit == nil {
		return Exit{}, errors.New("the helper ended without the command's exit status")
	}
	return *exit, nil
}
