// Command wanem is the userspace WAN emulator of hpncp's benchmarks: it
// joins two TUN devices with a packet-level link model (drop-tail queue,
// serialisation at a fixed rate, propagation delay with optional jitter and
// reordering, random loss) in each direction, so that the real TCP stacks
// of two network namespaces see a long fat path. bench/netns.sh creates the devices' namespaces and runs it;
// see bench/README.md.
//
// Usage:
//
//	wanem [--rtt 50ms] [--rate 1gbit] [--rate-back RATE]
//	      [--queue auto|BYTES|Nbdp] [--loss 0] [--jitter 0] [--reorder 0]
//	      [--mtu 1500] [--seed 1] [--tick auto|DURATION]
//	      [--offload=true|false] [--tun-a NAME] [--tun-b NAME]
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

// options is the emulated path: the same in both directions but for the
// rate (and the queue where it follows the rate), which may differ from
// A to B (rate) and from B to A (rateBack).
type options struct {
	rtt       time.Duration
	rate      int64 // bit/s from A to B; 0 is unlimited
	rateBack  int64 // bit/s from B to A; 0 is unlimited
	queue     int64 // bytes from A to B
	queueBack int64 // bytes from B to A
	loss      float64
	jitter    time.Duration // extra one-way delay per packet, up to this
	reorder   float64       // share of packets let past the one ahead
	mtu       int
	seed      uint64
	tick      time.Duration
	tunA      string
	tunB      string
	offload   bool // TCP GSO packets through the devices, cut by the emulator (gso.go)
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var (
		o                     options
		rate, rateBack, queue string
		loss, reorder, tick   string
		fs                    = flag.NewFlagSet("wanem", flag.ContinueOnError)
	)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: wanem [flags]

Joins two new TUN devices with an emulated WAN link in each direction.
Prints "ready" once both are up; stops on SIGINT or SIGTERM and prints
counters on stderr (also on SIGUSR1). Normally run by bench/netns.sh.

Example:
  wanem --rtt 100ms --rate 1gbit --tun-a wa0 --tun-b wb0
  wanem --rtt 100ms --rate 100mbit --rate-back 1gbit --queue 0.25bdp --jitter 2ms

Flags:
`)
		fs.PrintDefaults()
	}
	fs.DurationVar(&o.rtt, "rtt", 50*time.Millisecond, "round-trip propagation `delay`, half in each direction")
	fs.StringVar(&rate, "rate", "1gbit", "link `rate` from A to B, and from B to A unless --rate-back is given: 100mbit, 1gbit, ... or unlimited")
	fs.StringVar(&rateBack, "rate-back", "", "link `rate` from B to A (tun-b to tun-a) where it differs from --rate: an asymmetric link")
	fs.StringVar(&queue, "queue", "auto", "drop-tail queue per direction: `bytes` (k, m suffixes), or a multiple of the direction's bandwidth-delay product such as 0.25bdp, at least 32 packets; auto is 1bdp")
	fs.StringVar(&loss, "loss", "0", "random loss `probability` per packet and direction: 0.001 or 0.1%")
	fs.DurationVar(&o.jitter, "jitter", 0, "random extra one-way `delay` per packet, uniform from 0 to this; a packet still never leaves before the one ahead of it")
	fs.StringVar(&reorder, "reorder", "0", "`share` of packets let past the one ahead of them, per direction: 0.001 or 0.1%")
	fs.IntVar(&o.mtu, "mtu", 1500, "`MTU` of both devices")
	fs.Uint64Var(&o.seed, "seed", 1, "`seed` of the loss, jitter and reordering generator; a run is repeatable for a given packet sequence")
	fs.StringVar(&tick, "tick", "auto", "while packets are held, wake at most once per `interval` and handle packets in batches; 0 wakes for every packet; auto is 1% of the RTT, at most 1ms, and 0 below 10ms")
	fs.BoolVar(&o.offload, "offload", true, "take TCP senders' segmentation-offload packets whole and cut them into MTU-sized packets for the link model, then hand each run of segments due together to the receiver as one: the same packets on the link at a fraction of the CPU; false reads and writes every packet")
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
	o.rateBack = o.rate
	if rateBack != "" {
		if o.rateBack, err = parseRate(rateBack); err != nil {
			return o, fmt.Errorf("%w: --rate-back: %w", errUsage, err)
		}
	}
	if o.loss, err = parseLoss(loss); err != nil {
		return o, fmt.Errorf("%w: --loss: %w", errUsage, err)
	}
	if o.reorder, err = parseLoss(reorder); err != nil {
		return o, fmt.Errorf("%w: --reorder: %w", errUsage, err)
	}
	if o.rtt < 0 {
		return o, fmt.Errorf("%w: --rtt %v is negative", errUsage, o.rtt)
	}
	if o.jitter < 0 {
		return o, fmt.Errorf("%w: --jitter %v is negative", errUsage, o.jitter)
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
	q, err := parseQueue(queue)
	if err != nil {
		return o, fmt.Errorf("%w: --queue: %w", errUsage, err)
	}
	if q.bdps > 0 {
		o.queue = queueFor(q.bdps, o.rate, o.rtt, o.mtu)
		o.queueBack = queueFor(q.bdps, o.rateBack, o.rtt, o.mtu)
	} else if q.bytes < int64(o.mtu) {
		return o, fmt.Errorf("%w: --queue %d is smaller than one packet (MTU %d)", errUsage, q.bytes, o.mtu)
	} else {
		o.queue, o.queueBack = q.bytes, q.bytes
	}
	return o, nil
}

// arenaBytes is how many bytes of packets a direction of rate and queue
// may hold: its queue plus what the delay line, jitter included, carries
// at the link rate, with a margin for the reader running ahead. An
// unlimited link is sized for 10 Gbit/s, well above what a TUN pair
// sustains on one core.
func (o options) arenaBytes(rate, queue int64) int64 {
	if rate == 0 {
		rate, queue = 10e9, 0
	}
	line := int64(float64(rate) / 8 * (o.rtt/2 + o.jitter).Seconds())
	return (queue+line)*5/4 + 8<<20
}

// links are the two directions' models, A to B and B to A.
func (o options) links() (ab, ba *link) {
	ab = newLink(o.rate, o.rtt/2, o.queue, o.loss, o.seed).vary(o.jitter, o.reorder)
	ba = newLink(o.rateBack, o.rtt/2, o.queueBack, o.loss, o.seed+1).vary(o.jitter, o.reorder)
	return ab, ba
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	a, err := openTUN(o.tunA, o.mtu, o.offload)
	if err != nil {
		return err
	}
	defer unix.Close(a)
	b, err := openTUN(o.tunB, o.mtu, o.offload)
	if err != nil {
		return err
	}
	defer unix.Close(b)

	epoch := time.Now()
	clock := func() int64 { return int64(time.Since(epoch)) }
	ab, ba := o.links()
	pipes := []*pipe{
		newPipe(o.tunA+">"+o.tunB, a, b, ab, clock, o.tick, o.arenaBytes(o.rate, o.queue)),
		newPipe(o.tunB+">"+o.tunA, b, a, ba, clock, o.tick, o.arenaBytes(o.rateBack, o.queueBack)),
	}
	for _, p := range pipes {
		p.vnet = o.offload
	}
	fmt.Fprintf(stderr, "wanem: %s<->%s rtt=%v rate=%s rate_back=%s queue=%d queue_back=%d loss=%g jitter=%v reorder=%g mtu=%d tick=%v offload=%t\n",
		o.tunA, o.tunB, o.rtt, rateString(o.rate), rateString(o.rateBack), o.queue, o.queueBack, o.loss, o.jitter, o.reorder, o.mtu, o.tick, o.offload)
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
