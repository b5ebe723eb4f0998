package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// pcapgo's NgWriter fixes if_tsresol at 9 on every interface; a capture with
// interfaces of different resolutions needs its blocks written by hand
// (pcapng draft, sections 4.1–4.3).

// ngInterface is one Interface Description Block.
type ngInterface struct {
	name    string
	link    link
	tsresol uint8 // 0: option absent, the default 10^-6
}

// unitsPerSecond of the interface's if_tsresol (decimal resolutions only).
func (i ngInterface) unitsPerSecond() int64 {
	e := uint8(6)
	if i.tsresol != 0 {
		e = i.tsresol
	}
	n := int64(1)
	for range e {
		n *= 10
	}
	return n
}

const (
	ngSHB = 0x0A0D0D0A
	ngIDB = 0x00000001
	ngEPB = 0x00000006

	ngOptEnd     = 0
	ngOptIfName  = 2
	ngOptTSResol = 9
)

var le = binary.LittleEndian

// writeNg writes one little-endian section with the interfaces and packets;
// each packet goes to the interface its iface names.
func writeNg(buf *bytes.Buffer, ifaces []ngInterface, ps []packet) error {
	block(buf, ngSHB, func(b *bytes.Buffer) {
		b.Write(le.AppendUint32(nil, 0x1A2B3C4D)) // byte-order magic
		b.Write(le.AppendUint16(nil, 1))
		b.Write(le.AppendUint16(nil, 0))
		b.Write(le.AppendUint64(nil, ^uint64(0))) // section length unknown
	})
	for _, i := range ifaces {
		block(buf, ngIDB, func(b *bytes.Buffer) {
			b.Write(le.AppendUint16(nil, uint16(i.link.LinkType())))
			b.Write(le.AppendUint16(nil, 0))
			b.Write(le.AppendUint32(nil, snaplen))
			option(b, ngOptIfName, []byte(i.name))
			if i.tsresol != 0 {
				option(b, ngOptTSResol, []byte{i.tsresol})
			}
			option(b, ngOptEnd, nil)
		})
	}
	bl := newBuilder()
	for _, p := range ps {
		if p.iface < 0 || p.iface >= len(ifaces) {
			return fmt.Errorf("packet at %v: no interface %d", p.ts, p.iface)
		}
		i := ifaces[p.iface]
		data, err := bl.frame(i.link, p)
		if err != nil {
			return err
		}
		perSec := i.unitsPerSecond()
		ts := uint64(p.ts.Unix())*uint64(perSec) + uint64(int64(p.ts.Nanosecond())*perSec/1e9)
		block(buf, ngEPB, func(b *bytes.Buffer) {
			b.Write(le.AppendUint32(nil, uint32(p.iface)))
			b.Write(le.AppendUint32(nil, uint32(ts>>32)))
			b.Write(le.AppendUint32(nil, uint32(ts)))
			b.Write(le.AppendUint32(nil, uint32(len(data))))
			b.Write(le.AppendUint32(nil, uint32(len(data))))
			b.Write(data)
			pad(b, len(data))
		})
	}
	return nil
}

// block writes a block: type, total length, body, total length again.
func block(buf *bytes.Buffer, typ uint32, body func(*bytes.Buffer)) {
	var b bytes.Buffer
	body(&b)
	n := uint32(12 + b.Len())
	buf.Write(le.AppendUint32(nil, typ))
	buf.Write(le.AppendUint32(nil, n))
	buf.Write(b.Bytes())
	buf.Write(le.AppendUint32(nil, n))
}

func option(b *bytes.Buffer, code uint16, v []byte) {
	b.Write(le.AppendUint16(nil, code))
	b.Write(le.AppendUint16(nil, uint16(len(v))))
	b.Write(v)
	pad(b, len(v))
}

func pad(b *bytes.Buffer, n int) { b.Write(make([]byte, (4-n%4)%4)) }
