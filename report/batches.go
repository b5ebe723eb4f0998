package report

import (
	"io"
	"runtime"
	"sync"
)

// WriteBatches writes to w what format appends for each of n items, in
// order. Formatting is most of the cost of a large report, and each
// item's is its own, so batches of batch items are formatted on every
// core, each goroutine with its own state (made by state), while this
// goroutine writes the finished ones in order; at most two batches a core
// wait, which bounds the memory whatever n. The first error of format or
// of w stops the writing and is returned.
func WriteBatches[S any](w io.Writer, n, batch int, state func() S, format func(b []byte, s S, i int) ([]byte, error)) error {
	batches := (n + batch - 1) / batch
	workers := max(1, min(runtime.GOMAXPROCS(0), batches))
	type result struct {
		b   []byte
		err error
	}
	done := make([]chan result, batches)
	for i := range done {
		done[i] = make(chan result, 1)
	}
	todo := make(chan int)
	slots := make(chan struct{}, 2*workers) // batches formatted and not yet written
	// Written batches' buffers go back to the workers: a batch of the
	// 2 M-packet capture's JSON is half a megabyte, grown by append.
	free := make(chan []byte, 2*workers+1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	wg.Go(func() {
		defer close(todo)
		for k := range batches {
			select {
			case slots <- struct{}{}:
			case <-stop:
				return
			}
			select {
			case todo <- k:
			case <-stop:
				return
			}
		}
	})
	for range workers {
		wg.Go(func() {
			s := state()
			for k := range todo {
				var r result
				select {
				case r.b = <-free:
				default:
				}
				for i := k * batch; i < min(n, (k+1)*batch) && r.err == nil; i++ {
					r.b, r.err = format(r.b, s, i)
				}
				done[k] <- r
			}
		})
	}
	for k := range batches {
		r := <-done[k]
		if r.err != nil {
			return r.err
		}
		if _, err := w.Write(r.b); err != nil {
			return err
		}
		select {
		case free <- r.b[:0]:
		default:
		}
		<-slots
	}
	return nil
}
