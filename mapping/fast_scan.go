package mapping

import "encoding/binary"

// ScanPlain returns the index of the first byte of s that a JSON string
// cannot hold as it is: '"', '\\' or a control character (below 0x20), or
// len(s); and whether a byte before it is not ASCII (so that UTF-8 needs
// checking). It tests 8 bytes at a time: the classic "has a byte less
// than n" test, exact for whether there is one. It is the one string
// lexer of the module's JSON readers: the fast path's and the envelope
// scan's (bridge/wire).
func ScanPlain(s []byte) (int, bool) {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	var high uint64
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := binary.LittleEndian.Uint64(s[i:])
		q := x ^ (lo * '"')
		b := x ^ (lo * '\\')
		if ((x-lo*0x20)&^x|(q-lo)&^q|(b-lo)&^b)&hi != 0 {
			break
		}
		high |= x
	}
	var hb byte
	for ; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' {
			break
		}
		hb |= c
	}
	return i, high&hi != 0 || hb >= 0x80
}
