//go:build !race

package loadgen

// Race is true when the race detector is on: it makes each connection
// several times dearer, so long runs scale down (and say so).
const Race = false
