// The Go client's conformance adapter, a module of its own: it is no part of
// the client's module (clients/go), which it uses as any program would.
// The replace points at the client in this checkout. Built offline by
// clients/go/offline.sh, whose Go workspace uses this module (as it uses
// bench/go): Debian's msgpack sources, nothing downloaded:
//
//	(cd clients/go && ./offline.sh build -o /tmp/fenceq-go-adapter ../../conformance/adapters/go)
module github.com/fenceq/fenceq/conformance/adapters/go

go 1.19

require github.com/fenceq/fenceq/clients/go v0.0.0

replace github.com/fenceq/fenceq/clients/go => ../../../clients/go
