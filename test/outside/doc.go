// Package outside is a module outside symmem's that depends on it as any program
// would (docs/library.md): its test sets every field of the library's options and
// specs, and runs jobs through them on the CPU backend. A field whose type lives in
// one of symmem's internal packages cannot be set from here, and fails its build.
package outside
