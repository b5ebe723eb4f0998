package spill

import "syscall"

// mapPopulate has the kernel map every page of a mapping at once, from
// the page cache, where each page touched was a fault of its own.
const mapPopulate = syscall.MAP_POPULATE
