package h2

// OpenStreams is how many streams c holds decoding state for.
func (c *Conn) OpenStreams() int { return len(c.open) }

// Buffered is how many bytes c holds of frames not yet complete.
func (c *Conn) Buffered() int { return cap(c.halves[0].buf) + cap(c.halves[1].buf) }
