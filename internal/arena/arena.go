// Package arena holds a capture's millions of small records off the Go
// heap, in arrays taken from the system (Make) and given back (Free).
// They hold no pointer the collector would have to see, and do not count
// toward the heap the collector paces itself by: holding them costs no
// collection, and no allowance of garbage of their size.
package arena

import (
	"fmt"
	"reflect"
	"unsafe"
)

// checkPlain panics unless T holds no pointers: the collector does not
// see memory from alloc.
func checkPlain[T any]() {
	if t := reflect.TypeFor[T](); hasPointers(t) {
		panic(fmt.Sprintf("arena: %v holds pointers", t))
	}
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	}
	return true
}

// Make returns n zeroed elements off the Go heap; Free gives them back.
// T must hold no pointers: Make panics otherwise.
func Make[T any](n int) []T {
	checkPlain[T]()
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	if size == 0 {
		return make([]T, n)
	}
	b := alloc(size)
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// Free gives back s, from Make; s must not be used after it.
func Free[T any](s []T) {
	var zero T
	if size := cap(s) * int(unsafe.Sizeof(zero)); size > 0 {
		release(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), size))
	}
}
