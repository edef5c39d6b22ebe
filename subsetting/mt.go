package subsetting

// Python's random module, as far as classic subsetting needs it: the
// Mersenne Twister MT19937 seeded the way random.seed(n) seeds it for a
// non-negative integer n, random() with 53 bits, and the reference shuffle
// loop. Everything is integer arithmetic except the one float multiply of
// the shuffle, which Python does the same way (IEEE 754 double), so results
// are bit for bit those of CPython on every platform.

const (
	mtN        = 624
	mtM        = 397
	mtMatrixA  = 0x9908b0df
	mtUpper    = 0x80000000
	mtLower    = 0x7fffffff
	mtInitSeed = 19650218 // init_by_array's fixed init_genrand seed
)

// mt19937 is the generator state.
type mt19937 struct {
	state [mtN]uint32
	index int // next word of state to temper; mtN means regenerate
}

// seedPython seeds like Python's random.seed(n) for an int n >= 0:
// init_by_array with the 32-bit words of n, least significant first; the
// key of 0 is [0].
func (m *mt19937) seedPython(n uint64) {
	key := [2]uint32{uint32(n), uint32(n >> 32)}
	keyLen := 1
	if key[1] != 0 {
		keyLen = 2
	}
	m.initByArray(key[:keyLen])
}

func (m *mt19937) initGenrand(s uint32) {
	m.state[0] = s
	for i := 1; i < mtN; i++ {
		prev := m.state[i-1]
		m.state[i] = 1812433253*(prev^(prev>>30)) + uint32(i)
	}
	m.index = mtN
}

func (m *mt19937) initByArray(key []uint32) {
	m.initGenrand(mtInitSeed)
	i, j := 1, 0
	for k := max(mtN, len(key)); k > 0; k-- {
		prev := m.state[i-1]
		m.state[i] = (m.state[i] ^ ((prev ^ (prev >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= mtN {
			m.state[0] = m.state[mtN-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k := mtN - 1; k > 0; k-- {
		prev := m.state[i-1]
		m.state[i] = (m.state[i] ^ ((prev ^ (prev >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= mtN {
			m.state[0] = m.state[mtN-1]
			i = 1
		}
	}
	m.state[0] = mtUpper
	m.index = mtN
}

// uint32 returns the next tempered word (genrand_int32).
func (m *mt19937) uint32() uint32 {
	if m.index >= mtN {
		m.twist()
	}
	y := m.state[m.index]
	m.index++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

func (m *mt19937) twist() {
	for i := range mtN {
		y := (m.state[i] & mtUpper) | (m.state[(i+1)%mtN] & mtLower)
		v := m.state[(i+mtM)%mtN] ^ (y >> 1)
		if y&1 != 0 {
			v ^= mtMatrixA
		}
		m.state[i] = v
	}
	m.index = 0
}

// random53 returns the integer x of Python's random() = x / 2^53, in
// [0, 2^53): (a>>5) * 2^26 + (b>>6) for the next two words a, b.
func (m *mt19937) random53() uint64 {
	a := uint64(m.uint32() >> 5)
	b := uint64(m.uint32() >> 6)
	return a<<26 | b
}

// random returns Python's random(): a float64 in [0, 1) with 53 bits.
func (m *mt19937) random() float64 {
	return float64(m.random53()) * 0x1p-53 // exact: an integer below 2^53 times a power of two
}

// shufflePython shuffles xs with the reference algorithm classic subsetting
// specifies (Python 2's random.shuffle, and Python 3's with an explicit
// random function): for i from len-1 down to 1, j = floor(random() * (i+1)),
// swap xs[i] and xs[j].
func (m *mt19937) shufflePython(xs []uint32) {
	for i := len(xs) - 1; i > 0; i-- {
		j := int(m.random() * float64(i+1))
		xs[i], xs[j] = xs[j], xs[i]
	}
}
