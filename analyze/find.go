package analyze

import "hash/maphash"

// Find returns the attempt the tracker holds for a's tuple and ISN, with
// its retransmits and its Ending as the segments read so far show it (the
// zero Ending until SetFatesKnown), and whether it holds one. Only a's
// Src, Dst and Seq are read. A chain read as it goes asks for a few
// attempts at a time, where List and Chains build every one.
func (t *Tracker) Find(a Attempt) (Attempt, bool) {
	if t.pushed.n > 0 || t.late.n > 0 {
		t.readSegments()
	}
	if t.indexed < t.attempts.n {
		t.index()
	}
	k := keyOf(SYN{Src: a.Src, Dst: a.Dst, Seq: a.Seq})
	i, _ := t.find(&k, maphash.Comparable(t.seed, k)>>32)
	if i < 0 {
		return Attempt{}, false
	}
	r := t.rec(i)
	out := r.attempt()
	if !t.fatesKnown {
		return out, true
	}
	// What leave would store at home, without storing it: the slot keeps
	// the attempt's fate as it reads on.
	f := r.fate
	if t.recent != nil {
		if e := t.slot(t.keyHash(&r.key)); e.ref == uint32(i+1) && e.fate != (fateRec{}) {
			if e.homed {
				f.merge(&e.fate)
			} else {
				f = e.fate
			}
		}
	}
	out.Ending = f.ending(stamp{r.sec, r.nsec}, r.last)
	return out, true
}
