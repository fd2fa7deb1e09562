package stripe

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReceive: whatever bytes a connection brings, Receive ends (with
// its close frame, an error wrapping ErrFrame or ErrConnLost), never
// panics, and what the stream's reader gets is the data frames' bytes in
// the order of their numbers, from frame 0 on and without a gap.
func FuzzReceive(f *testing.F) {
	add := func(frames ...Frame) {
		var b bytes.Buffer
		for _, fr := range frames {
			WriteFrame(&b, fr)
		}
		f.Add(b.Bytes())
	}
	add(data(0, "hello "), data(1, "world"), eof(2), closeFrame)
	add(data(1, "b"), data(0, "a"), closeFrame)
	add(data(0, "a"), data(0, "a"))
	add(Frame{Kind: KindHello, Payload: []byte{0, 1}}, data(0, "x"), Frame{Kind: KindExit, Payload: []byte("0")}, eof(1), closeFrame)
	add(Frame{Kind: KindError, Payload: []byte("no such command\x1b[2J")}, closeFrame)
	f.Add(header(KindData, Stdout, 0, MaxPayload+1, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		// The budget is above any input: one connection's frames ahead of
		// their turn would otherwise wait for a frame no one brings.
		m := NewMerger(Stdout, 1<<30)
		g := NewGroup(m)
		g.Add(1)
		var sent map[uint64][]byte = map[uint64][]byte{}
		control := func(fr Frame) error {
			if fr.Kind == KindHello && len(fr.Payload) == 0 {
				return errors.New("empty hello")
			}
			return nil
		}
		// Note each data frame as the wire has it, to check the reader.
		var wire bytes.Buffer
		r := io.TeeReader(bytes.NewReader(b), &wire)
		err := Receive(r, [MaxStreams]*Merger{Stdout: m}, control)
		g.Done()
		if err != nil && !errors.Is(err, ErrFrame) && !errors.Is(err, ErrConnLost) && err.Error() != "empty hello" {
			t.Fatalf("Receive: %v", err)
		}
		for rd := bytes.NewReader(wire.Bytes()); ; {
			fr, err := ReadFrame(rd, nil)
			if err != nil {
				break
			}
			if fr.Kind == KindData && fr.Stream == Stdout {
				if _, dup := sent[fr.Seq]; !dup {
					sent[fr.Seq] = fr.Payload
				}
			}
		}
		got, _ := io.ReadAll(m)
		var want []byte
		for seq := uint64(0); len(want) < len(got); seq++ {
			p, ok := sent[seq]
			if !ok {
				t.Fatalf("the reader got %d bytes, past frame %d, which never came", len(got), seq)
			}
			want = append(want, p...)
		}
		if !bytes.HasPrefix(want, got) {
			t.Fatalf("the reader got %q, not the frames in order (%q)", got, want)
		}
	})
}
