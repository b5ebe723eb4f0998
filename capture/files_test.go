package capture

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
)

// Builders for hand-made capture files, in either byte order.

type pcapRecord struct {
	sec, frac uint32
	data      []byte
	orig      uint32 // 0 means len(data)
}

// pcapFile builds a classic pcap file.
func pcapFile(o binary.AppendByteOrder, nano bool, linktype uint32, recs ...pcapRecord) []byte {
	magic := uint32(magicMicro)
	if nano {
		magic = magicNano
	}
	b := o.AppendUint32(nil, magic)
	b = o.AppendUint16(b, 2)
	b = o.AppendUint16(b, 4)
	b = o.AppendUint32(b, 0) // thiszone
	b = o.AppendUint32(b, 0) // sigfigs
	b = o.AppendUint32(b, 262144)
	b = o.AppendUint32(b, linktype)
	for _, r := range recs {
		orig := r.orig
		if orig == 0 {
			orig = uint32(len(r.data))
		}
		b = o.AppendUint32(b, r.sec)
		b = o.AppendUint32(b, r.frac)
		b = o.AppendUint32(b, uint32(len(r.data)))
		b = o.AppendUint32(b, orig)
		b = append(b, r.data...)
	}
	return b
}

// ngWriter builds a pcapng file block by block.
type ngWriter struct {
	o   binary.AppendByteOrder
	buf []byte
}

func pad4(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// block appends a block of type typ with body (padded to 4 bytes).
func (w *ngWriter) block(typ uint32, body []byte) *ngWriter {
	body = pad4(body)
	n := uint32(12 + len(body))
	w.buf = w.o.AppendUint32(w.buf, typ)
	w.buf = w.o.AppendUint32(w.buf, n)
	w.buf = append(w.buf, body...)
	w.buf = w.o.AppendUint32(w.buf, n)
	return w
}

// option encodes one option (code, value, padding).
func (w *ngWriter) option(code uint16, v []byte) []byte {
	b := w.o.AppendUint16(nil, code)
	b = w.o.AppendUint16(b, uint16(len(v)))
	return pad4(append(b, v...))
}

// shb starts a section in w's byte order (switch w.o first for another).
func (w *ngWriter) shb(major, minor uint16) *ngWriter {
	b := w.o.AppendUint32(nil, ngByteOrderMagic)
	b = w.o.AppendUint16(b, major)
	b = w.o.AppendUint16(b, minor)
	b = w.o.AppendUint64(b, ^uint64(0)) // section length unknown
	b = append(b, w.option(3, []byte("test"))...)
	b = append(b, w.option(0, nil)...)
	return w.block(ngSHB, b)
}

// idb describes an interface; tsresol < 0 omits the option.
func (w *ngWriter) idb(lt uint16, snaplen uint32, tsresol int, tsoffset int64) *ngWriter {
	b := w.o.AppendUint16(nil, lt)
	b = w.o.AppendUint16(b, 0)
	b = w.o.AppendUint32(b, snaplen)
	b = append(b, w.option(2, []byte("eth0"))...)
	if tsresol >= 0 {
		b = append(b, w.option(ngOptTSResol, []byte{byte(tsresol)})...)
	}
	if tsoffset != 0 {
		b = append(b, w.option(ngOptTSOff, w.o.AppendUint64(nil, uint64(tsoffset)))...)
	}
	b = append(b, w.option(0, nil)...)
	return w.block(ngIDB, b)
}

func (w *ngWriter) epb(iface uint32, ts uint64, data []byte) *ngWriter {
	b := w.o.AppendUint32(nil, iface)
	b = w.o.AppendUint32(b, uint32(ts>>32))
	b = w.o.AppendUint32(b, uint32(ts))
	b = w.o.AppendUint32(b, uint32(len(data)))
	b = w.o.AppendUint32(b, uint32(len(data)))
	b = pad4(append(b, data...))
	b = append(b, w.option(1, []byte("a comment"))...)
	b = append(b, w.option(0, nil)...)
	return w.block(ngEPB, b)
}

func (w *ngWriter) opb(iface uint16, ts uint64, data []byte) *ngWriter {
	b := w.o.AppendUint16(nil, iface)
	b = w.o.AppendUint16(b, 0)
	b = w.o.AppendUint32(b, uint32(ts>>32))
	b = w.o.AppendUint32(b, uint32(ts))
	b = w.o.AppendUint32(b, uint32(len(data)))
	b = w.o.AppendUint32(b, uint32(len(data)))
	return w.block(ngOPB, append(b, data...))
}

func (w *ngWriter) spb(data []byte) *ngWriter {
	b := w.o.AppendUint32(nil, uint32(len(data)))
	return w.block(ngSPB, append(b, data...))
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}
