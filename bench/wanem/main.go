// Command wanem is the userspace WAN emulator of hpncp's benchmarks: it
// joins two TUN devices with a packet-level link model (drop-tail queue,
// serialisation at a fixed rate, propagation delay, random loss) in each
// direction, so that the real TCP stacks of two network namespaces see a
// long fat path. bench/netns.sh creates the devices' namespaces and runs it;
// see bench/README.md.
//
// Usage:
//
//	wanem [--rtt 50ms] [--rate 1gbit] [--queue auto|BYTES] [--loss 0]
//	      [--mtu 1500] [--seed 1] [--tick auto|DURATION]
//	      [--tun-a NAME] [--tun-b NAME]
//
// It prints "ready" on stdout once both devices exist and are up, runs until
// SIGINT or SIGTERM, then removes the devices and prints one line of counters
// per direction on stderr (also on SIGUSR1, without stopping).
//
// Exit codes: 0 after a signal, 1 on an error, 2 on a usage error.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hpncp/hpncp/internal/units"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "wanem: error: %v\n", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// options is the emulated path: the same in both directions.
type options struct {
	rtt   time.Duration
	rate  int64 // bit/s; 0 is unlimited
	queue int64 // bytes per direction
	loss  float64
	mtu   int
	seed  uint64
	tick  time.Duration
	tunA  string
	tunB  string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var (
		o                       options
		rate, queue, loss, tick string
		fs                      = flag.NewFlagSet("wanem", flag.ContinueOnError)
	)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: wanem [flags]

Joins two new TUN devices with an emulated WAN link in each direction.
Prints "ready" once both are up; stops on SIGINT or SIGTERM and prints
counters on stderr (also on SIGUSR1). Normally run by bench/netns.sh.

Example:
  wanem --rtt 100ms --rate 1gbit --tun-a wa0 --tun-b wb0

Flags:
`)
		fs.PrintDefaults()
	}
	fs.DurationVar(&o.rtt, "rtt", 50*time.Millisecond, "round-trip propagation `delay`, half in each direction")
	fs.StringVar(&rate, "rate", "1gbit", "link `rate` per direction: 100mbit, 1gbit, ... or unlimited")
	fs.StringVar(&queue, "queue", "auto", "drop-tail queue per direction in `bytes` (k, m suffixes); auto is one bandwidth-delay product, at least 32 packets")
	fs.StringVar(&loss, "loss", "0", "random loss `probability` per packet and direction: 0.001 or 0.1%")
	fs.IntVar(&o.mtu, "mtu", 1500, "`MTU` of both devices")
	fs.Uint64Var(&o.seed, "seed", 1, "`seed` of the loss generator; a run is repeatable for a given packet sequence")
	fs.StringVar(&tick, "tick", "auto", "while packets are held, wake at most once per `interval` and handle packets in batches; 0 wakes for every packet; auto is 1% of the RTT, at most 1ms, and 0 below 10ms")
	fs.StringVar(&o.tunA, "tun-a", "wanem0", "`name` of the first TUN device")
	fs.StringVar(&o.tunB, "tun-b", "wanem1", "`name` of the second TUN device")
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	var err error
	if o.rate, err = parseRate(rate); err != nil {
		return o, fmt.Errorf("%w: --rate: %w", errUsage, err)
	}
	if o.loss, err = parseLoss(loss); err != nil {
		return o, fmt.Errorf("%w: --loss: %w", errUsage, err)
	}
	if o.rtt < 0 {
		return o, fmt.Errorf("%w: --rtt %v is negative", errUsage, o.rtt)
	}
	if o.mtu < 576 || o.mtu > maxPacket {
		return o, fmt.Errorf("%w: --mtu %d: want 576 to %d", errUsage, o.mtu, maxPacket)
	}
	if tick == "auto" {
		o.tick = autoTick(o.rtt)
	} else if o.tick, err = time.ParseDuration(tick); err != nil || o.tick < 0 || o.tick > 10*time.Millisecond {
		return o, fmt.Errorf("%w: --tick %q: want auto or a duration from 0 to 10ms", errUsage, tick)
	}
	if o.tunA == o.tunB {
		return o, fmt.Errorf("%w: --tun-a and --tun-b are both %q", errUsage, o.tunA)
	}
	if queue == "auto" {
		o.queue = autoQueue(o.rate, o.rtt, o.mtu)
	} else if o.queue, err = units.ParseTCSize(queue); err != nil {
		return o, fmt.Errorf("%w: --queue: %w", errUsage, err)
	} else if o.queue < int64(o.mtu) {
		return o, fmt.Errorf("%w: --queue %d is smaller than one packet (MTU %d)", errUsage, o.queue, o.mtu)
	}
	return o, nil
}

// arenaBytes is how many bytes of packets one direction may hold: its
// queue plus what the delay line carries at the link rate, with a margin
// for the reader running ahead. An unlimited link is sized for 10 Gbit/s,
// well above what a TUN pair sustains on one core.
func (o options) arenaBytes() int64 {
	rate, queue := o.rate, o.queue
	if rate == 0 {
		rate, queue = 10e9, 0
	}
	line := int64(float64(rate) / 8 * (o.rtt / 2).Seconds())
	return (queue+line)*5/4 + 8<<20
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	a, err := openTUN(o.tunA, o.mtu)
	if err != nil {
		return err
	}
	defer unix.Close(a)
	b, err := openTUN(o.tunB, o.mtu)
	if err != nil {
		return err
	}
	defer unix.Close(b)

	epoch := time.Now()
	clock := func() int64 { return int64(time.Since(epoch)) }
	pipes := []*pipe{
		newPipe(o.tunA+">"+o.tunB, a, b, newLink(o.rate, o.rtt/2, o.queue, o.loss, o.seed), clock, o.tick, o.arenaBytes()),
		newPipe(o.tunB+">"+o.tunA, b, a, newLink(o.rate, o.rtt/2, o.queue, o.loss, o.seed+1), clock, o.tick, o.arenaBytes()),
	}
	fmt.Fprintf(stderr, "wanem: %s<->%s rtt=%v rate=%s queue=%d loss=%g mtu=%d tick=%v\n",
		o.tunA, o.tunB, o.rtt, rateString(o.rate), o.queue, o.loss, o.mtu, o.tick)
	if _, err := fmt.Fprintln(stdout, "ready"); err != nil {
		return fmt.Errorf("announce ready: %w", err)
	}
	err = forward(ctx, pipes, stderr)
	for _, p := range pipes {
		fmt.Fprintf(stderr, "wanem: %s\n", p.report())
	}
	return err
}

// forward runs every pipe on its own thread until ctx is cancelled or one
// of them fails. SIGUSR1 prints the counters meanwhile.
func forward(ctx context.Context, pipes []*pipe, stderr io.Writer) error {
	// An eventfd in every pipe's poll set is how they are told to stop:
	// they sleep in ppoll, out of reach of Go's scheduler.
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("create stop eventfd: %w", err)
	}
	defer unix.Close(stop)
	// Each pipe's thread sits in a blocking syscall most of the time. With
	// a spare P per thread Go's sysmon has no reason to take Ps back from
	// them, which would otherwise start and park threads all the time.
	if n := len(pipes) + 2; runtime.GOMAXPROCS(0) < n {
		runtime.GOMAXPROCS(n)
	}
	errs := make(chan error, len(pipes))
	for _, p := range pipes {
		go func() { errs <- p.run(stop) }()
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)

	var first error
	running := len(pipes)
	for running == len(pipes) && ctx.Err() == nil {
		select {
		case <-usr1:
			for _, p := range pipes {
				fmt.Fprintf(stderr, "wanem: %s\n", p.report())
			}
		case first = <-errs:
			running--
		case <-ctx.Done():
		}
	}
	for _, p := range pipes {
		p.quit.Store(true)
	}
	one := binary.NativeEndian.AppendUint64(nil, 1)
	if _, err := unix.Write(stop, one); err != nil {
		return fmt.Errorf("stop forwarding: %w", err)
	}
	for ; running > 0; running-- {
		if err := <-errs; first == nil {
			first = err
		}
	}
	return first
}

// autoTick is the default batching interval: 1 % of the RTT, which keeps
// the timing error of a batched packet within the noise of any measurement
// while cutting wake-ups, each of which costs tens of µs of CPU in a VM.
// Below 100 µs batching would add sleeps rather than save
// them (a sleep overshoots by ~40 µs anyway), so short RTTs get exact
// per-packet timing; past 1 ms the savings are small.
func autoTick(rtt time.Duration) time.Duration {
	t := min(rtt/100, time.Millisecond)
	if t < 100*time.Microsecond {
		return 0
	}
	return t
}

func rateString(r int64) string {
	switch {
	case r == 0:
		return "unlimited"
	case r%1e9 == 0:
		return fmt.Sprintf("%dgbit", r/1e9)
	case r%1e6 == 0:
		return fmt.Sprintf("%dmbit", r/1e6)
	}
	return fmt.Sprintf("%dbit", r)
}
