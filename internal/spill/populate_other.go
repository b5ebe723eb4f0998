//go:build unix && !linux

package spill

const mapPopulate = 0
