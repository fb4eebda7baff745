package mapping

import "encoding/binary"

// indexSpecial returns the index of the first byte of s that a JSON string
// cannot hold as it is: '"', '\\' or a control character (below 0x20), or
// len(s). It tests 8 bytes at a time.
func indexSpecial(s []byte) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := binary.LittleEndian.Uint64(s[i:])
		q := x ^ (lo * '"')
		b := x ^ (lo * '\\')
		// A byte below 0x20, or equal to '"' or '\\' (then q or b has a
		// zero byte): the classic "has a byte less than n" test, exact for
		// whether there is one.
		if ((x-lo*0x20)&^x|(q-lo)&^q|(b-lo)&^b)&hi != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return i
		}
	}
	return i
}
